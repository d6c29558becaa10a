package client

import (
	"context"
	"fmt"
	"iter"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// PageFunc fetches one page of a paged list (AIP-158: page_size,
// page_token, next_page_token): the page at token ("" for the first), its
// items, and the next page's token ("" after the last page).
type PageFunc[T any] func(ctx context.Context, token string) (items []T, next string, err error)

// Paginate yields every item of a paged list in order, fetching each page
// when the loop reaches it (each fetch is a call, retried as any). A
// failure is yielded once, with the zero T, and ends the sequence;
// breaking out of the loop fetches nothing more. A server that hands out
// the same token twice ends it with an error rather than looping.
func Paginate[T any](ctx context.Context, page PageFunc[T]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		seen := map[string]bool{}
		token := ""
		for {
			items, next, err := page(ctx, token)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			if seen[next] {
				yield(zero, fmt.Errorf("paging: the server returned page token %q twice", next))
				return
			}
			seen[next] = true
			token = next
		}
	}
}

// ChannelMembers yields the members of a channel, pageSize (0: the
// server's default, 100; at most 1,000) per GetChannel call.
func (c *Client) ChannelMembers(ctx context.Context, channelID string, pageSize int32) iter.Seq2[string, error] {
	return Paginate(ctx, func(ctx context.Context, token string) ([]string, string, error) {
		res, err := c.GetChannel(ctx, connect.NewRequest(&receiptsv1.GetChannelRequest{
			ChannelId: channelID, PageSize: pageSize, PageToken: token,
		}))
		if err != nil {
			return nil, "", err
		}
		return res.Msg.GetMembers(), res.Msg.GetNextPageToken(), nil
	})
}
