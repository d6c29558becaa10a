package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/readstate/receipts/api"
)

// OpenAPIPath serves the REST contract, api/openapi.json.
const OpenAPIPath = "/openapi.json"

// openAPIHandler answers GET and HEAD with the document as committed,
// with an ETag: a client revalidates with If-None-Match and gets 304
// until a deploy changes the document.
func openAPIHandler() http.Handler {
	doc := api.OpenAPIJSON()
	sum := sha256.Sum256([]byte(doc))
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("ETag", etag)
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(doc))
	})
}
