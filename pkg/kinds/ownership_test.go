package kinds_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// owner is the folder that owns a kind's (or a view's) storage: its
// Postgres tables and its Redis key prefixes.
type owner struct {
	folder   string
	tables   []string
	prefixes []string // Redis key prefixes as the code writes them ("del:")
}

// owners lists every kind and view with storage of its own.
var owners = []owner{
	{"pkg/kinds/deletions", []string{"channel_deletions"}, []string{"del:"}},
	{"pkg/kinds/groupmentions", []string{"channel_group_mentions"}, []string{"gm:"}},
	{"pkg/kinds/notifications", []string{"channel_notifications"}, []string{"nl:"}},
	{"pkg/kinds/mentions", []string{"mentions"}, []string{"mh:"}},
	{"pkg/kinds/threads", []string{"thread_heads", "thread_states"}, []string{"th:", "tu:"}},
	{"pkg/kinds/settings", []string{"user_settings"}, []string{"us:"}},
	{"pkg/kinds/heads", []string{"channel_heads"}, []string{"hd:", "mi:"}},
	{"pkg/kinds/fullyread", []string{"fully_read"}, []string{"fr:"}},
	{"pkg/kinds/members", []string{"channel_members"}, []string{"um:", "cm:"}},
	{"pkg/kinds/cursors", []string{"read_receipts"}, []string{"u:{"}},
	{"pkg/views/readby", []string{"cursor_moves"}, []string{"cv:"}},
}

// tableName matches table tb as SQL names it, or as a string a statement
// is built from (a Go identifier or a word in prose is not its name; nor
// is a string of one word, a field name as often as a table's).
func tableName(tb string) *regexp.Regexp {
	sql := `(?i)\b(from|into|update|join|table|using|truncate)\s+(only\s+)?` + tb + `\b`
	if strings.Contains(tb, "_") {
		sql += `|"` + tb + `"`
	}
	return regexp.MustCompile(sql)
}

// Each kind's Postgres tables and each kind's or view's Redis key prefixes
// are named in product code only inside its own folder (and the
// migrations): a view or a change feed that joins a kind's table names
// it through the kind (kind.ComposeSQL).
func TestStorageIsNamedOnlyByItsOwner(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, dir := range []string{"pkg", "cmd"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			name := d.Name()
			if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".pb.go") || strings.Contains(path, "testdata") {
				return nil
			}
			if ext := filepath.Ext(name); ext == ".go" || ext == ".sql" || ext == ".lua" {
				rel, _ := filepath.Rel(root, path)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		}))
	}
	require.NotEmpty(t, files)
	texts := make(map[string]string, len(files))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		texts[f] = string(b)
	}

	for _, o := range owners {
		var names []struct {
			name string
			re   *regexp.Regexp
		}
		for _, tb := range o.tables {
			names = append(names, struct {
				name string
				re   *regexp.Regexp
			}{tb, tableName(tb)})
		}
		for _, p := range o.prefixes {
			names = append(names, struct {
				name string
				re   *regexp.Regexp
			}{p, regexp.MustCompile(`"` + regexp.QuoteMeta(p))})
		}
		for _, n := range names {
			var outside []string
			for _, f := range files {
				if strings.HasPrefix(f, o.folder+"/") || !n.re.MatchString(texts[f]) {
					continue
				}
				outside = append(outside, f)
			}
			assert.Empty(t, outside, "files outside %s that name %s", o.folder, n.name)
		}
	}
}
