package seam

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/views/unread"
)

// Paging of a user's default channel set (GetReadState, GetUnread): pages
// in channel id order, the token the last channel of the previous page.
// The maximum is the bound of one read of a user's channels.
const (
	ChannelPageSizeDefault = 1000
	MaxChannelPageSize     = redisstore.MaxUnreadChannels
)

// ChannelPage reads page_size and page_token of a call that lists
// channels or asks for the default set (listed false); paging applies to
// the default set only (a listed call gets the zero Page: no cut).
func ChannelPage(size int32, token string, listed bool) (unread.Page, error) {
	if listed && (size != 0 || token != "") {
		field := "page_size"
		if token != "" {
			field = "page_token"
		}
		return unread.Page{}, Invalid(apierr.InvalidField, &receipt.FieldError{Field: field, Reason: "pages the default channel set only: list no channel_id, or drop it"})
	}
	if listed {
		return unread.Page{}, nil // the listed channels, all of them
	}
	switch {
	case size == 0:
		size = ChannelPageSizeDefault
	case size < 0 || size > MaxChannelPageSize:
		return unread.Page{}, Invalid(apierr.InvalidField, &receipt.FieldError{Field: "page_size", Reason: fmt.Sprintf("must be within [1, %d], got %d", MaxChannelPageSize, size)})
	}
	after, err := DecodePageToken(token)
	if err != nil {
		return unread.Page{}, Invalid(apierr.InvalidField, err)
	}
	return unread.Page{After: after, Limit: int(size)}, nil
}

// NextPageToken is the token of the page after the one ending at channel.
func NextPageToken(lastChannel string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastChannel))
}

// PageOf cuts a whole, channel-sorted default set down to page: the
// items after page.After, at most page.Limit; more reports a cut at the
// end. The Postgres fallbacks read the whole set (bounded) and page it
// here; Redis pages before reading the heads.
func PageOf[T any](items []T, channelOf func(T) string, page unread.Page) (kept []T, more bool) {
	if page.After != "" {
		i, found := slices.BinarySearchFunc(items, page.After, func(it T, after string) int {
			return strings.Compare(channelOf(it), after)
		})
		if found {
			i++
		}
		items = items[i:]
	}
	if page.Limit > 0 && len(items) > page.Limit {
		return items[:page.Limit], true
	}
	return items, false
}

// DecodePageToken reads the opaque token: the last user id of the
// previous page.
func DecodePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err == nil {
		err = receipt.ValidateID("page_token", string(b))
	}
	if err != nil {
		return "", &receipt.FieldError{Field: "page_token", Reason: "is not a token this service issued: " + strings.TrimPrefix(err.Error(), "page_token: ")}
	}
	return string(b), nil
}
