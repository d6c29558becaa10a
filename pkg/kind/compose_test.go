package kind_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/readstate/receipts/pkg/kind"
)

func TestComposeSQLFillsEachKindsTable(t *testing.T) {
	tables := map[string]string{"members": "channel_members", "settings": "user_settings"}
	got := kind.ComposeSQL("SELECT 1 FROM {members} m JOIN {settings} s USING (user_id) WHERE m.c = '{}'", tables)
	assert.Equal(t, "SELECT 1 FROM channel_members m JOIN user_settings s USING (user_id) WHERE m.c = '{}'", got)
	assert.PanicsWithValue(t, "kind.ComposeSQL: no table for {cursors}", func() { kind.ComposeSQL("FROM {cursors}", tables) })
}
