package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
)

// MaxEndUserChannels bounds the distinct channels one call of an end-user
// token names for the membership check (a watch's, a lookup's).
const MaxEndUserChannels = 1000

// Memberships answers which of channels a user is a member of now
// (gate.Gate.Members): what an end-user token's watch and receipt reads
// are checked against.
type Memberships interface {
	Members(ctx context.Context, user string, channels []string) (map[string]bool, error)
}

// idField is one id of a request, with its field's name in the request's
// terms ("receipts[3].user_id").
type idField struct{ name, id string }

// ownRule is what of a request an end-user token must own: every user id
// users lists must be the token's user, and the token's user must be a
// member of every channel channels lists.
type ownRule struct {
	users    func(proto.Message) []idField
	channels func(proto.Message) []idField
}

// ownOnly holds an end-user client's call to its own user and its user's
// channels (endUserRules): nil when msg stays within them; else
// PermissionDenied naming the field and the reason (NOT_YOUR_USER,
// NOT_A_MEMBER) with the scope a server token would need, or the
// membership check's own failure.
func (a authorizer) ownOnly(ctx context.Context, c *apiauth.Client, procedure, call string, need apiauth.Scope, msg any) error {
	rule, ok := endUserRules[procedure]
	m, isMsg := msg.(proto.Message)
	if !ok || !isMsg {
		return apierr.New(connect.CodePermissionDenied, apierr.ScopeMissing,
			fmt.Errorf("permission denied: %s is a server token's call, which end-user token %s cannot make", call, c.Name),
			apierr.Meta{Key: apierr.KeyScope, Value: need.String()})
	}
	if rule.users != nil {
		for _, f := range rule.users(m) {
			if f.id != c.User {
				return apierr.New(connect.CodePermissionDenied, apierr.NotYourUser,
					fmt.Errorf("permission denied: %s of user %q: the end-user token of %q acts on its own user only (a server token with the %q scope acts for any)", call, f.id, c.User, need),
					apierr.Field(f.name), apierr.Meta{Key: apierr.KeyScope, Value: need.String()})
			}
		}
	}
	if rule.channels == nil {
		return nil
	}
	return a.inChannels(ctx, c, call, need, rule.channels(m))
}

// inChannels requires c's user to be a member of every channel of fields.
func (a authorizer) inChannels(ctx context.Context, c *apiauth.Client, call string, need apiauth.Scope, fields []idField) error {
	if len(fields) == 0 {
		return nil // the handler refuses an empty list
	}
	var channels []string
	first := make(map[string]string, len(fields)) // channel → its first field
	for _, f := range fields {
		if err := receipt.ValidateID(f.name, f.id); err != nil {
			return apierr.New(connect.CodeInvalidArgument, apierr.InvalidID, err, apierr.Field(f.name))
		}
		if _, dup := first[f.id]; !dup {
			first[f.id] = f.name
			channels = append(channels, f.id)
		}
	}
	if len(channels) > MaxEndUserChannels {
		return apierr.New(connect.CodeInvalidArgument, apierr.BatchTooLarge,
			fmt.Errorf("%s names %d channels; an end-user token's call names at most %d", call, len(channels), MaxEndUserChannels),
			apierr.Limit(MaxEndUserChannels))
	}
	if a.members == nil {
		return apierr.New(connect.CodePermissionDenied, apierr.NotAMember, errors.New("permission denied: this API cannot check channel membership"))
	}
	member, err := a.members.Members(ctx, c.User, channels)
	if err != nil {
		return err
	}
	for _, ch := range channels {
		if !member[ch] {
			return apierr.New(connect.CodePermissionDenied, apierr.NotAMember,
				fmt.Errorf("permission denied: %s of channel %q: user %q is not a member of it, and an end-user token watches and reads receipts only of its user's channels (a server token with the %q scope reads any)", call, ch, c.User, need),
				apierr.Field(first[ch]), apierr.Meta{Key: apierr.KeyScope, Value: need.String()})
		}
	}
	return nil
}
