package kind

import (
	"fmt"
	"regexp"
)

// placeholder is a table a composed statement names by its owner: {name}.
var placeholder = regexp.MustCompile(`\{([a-z_]+)\}`)

// ComposeSQL fills a statement that joins other kinds' tables (a view's
// read, a change feed's settings join): each {name} in text becomes the
// table tables[name], which the owning kind exports, so a table is named
// only by its kind and a renamed one changes one folder. It panics on a
// placeholder no table fills: the statements are package variables, so a
// wrong one fails at start and in every test.
func ComposeSQL(text string, tables map[string]string) string {
	return placeholder.ReplaceAllStringFunc(text, func(p string) string {
		tb, ok := tables[p[1:len(p)-1]]
		if !ok {
			panic(fmt.Sprintf("kind.ComposeSQL: no table for %s", p))
		}
		return tb
	})
}
