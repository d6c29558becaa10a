// Package apierr owns the receipts API's machine-readable refusals: the
// list of reasons (reasons.go), the constructor that puts a
// google.rpc.ErrorInfo (domain receipts.v1, a reason, the offending field
// and other facts as metadata) on a connect error, the readers a client
// or a test uses to get the reason back, and the writers of a refusal
// made outside a connect handler (the API guard, the REST transport).
//
// Connect puts the ErrorInfo in gRPC's grpc-status-details-bin and in the
// Connect error JSON's details; vanguard and WriteREST put it in the REST
// body, a JSON google.rpc.Status:
//
//	{"code":3,"message":"…","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",
//	  "reason":"INVALID_ID","domain":"receipts.v1","metadata":{"field":"user_id"}}]}
package apierr

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/readstate/receipts/pkg/receipt"
)

// Meta is one metadata entry of a refusal's ErrorInfo.
type Meta struct{ Key, Value string }

// Field names the offending field (when the error is no
// *receipt.FieldError, which names it by itself).
func Field(name string) Meta { return Meta{KeyField, name} }

// Limit is the limit a list or body is over.
func Limit(n int64) Meta { return Meta{KeyLimit, strconv.FormatInt(n, 10)} }

// Head is the channel head the service knows.
func Head(seq int64) Meta { return Meta{KeyHead, strconv.FormatInt(seq, 10)} }

// RetryAfter is the retry delay: metadata retry_after_seconds, and the
// Retry-After header (a gRPC trailer) with the same value.
func RetryAfter(d time.Duration) Meta { return Meta{KeyRetryAfter, Seconds(d)} }

// Seconds is d as a Retry-After value: whole seconds, rounded up, at
// least 1.
func Seconds(d time.Duration) string {
	return strconv.FormatInt(int64(max(1, (d+time.Second-1)/time.Second)), 10)
}

// New is the API's refusal of a call: code, err's text as the message,
// and an ErrorInfo of reason whose metadata holds the field a
// *receipt.FieldError in err names, then meta.
func New(code connect.Code, reason Reason, err error, meta ...Meta) *connect.Error {
	info := &errdetails.ErrorInfo{Reason: string(reason), Domain: Domain}
	if fe, ok := errors.AsType[*receipt.FieldError](err); ok {
		info.Metadata = map[string]string{KeyField: fe.Field}
	}
	cerr := connect.NewError(code, err)
	for _, m := range meta {
		if info.Metadata == nil {
			info.Metadata = make(map[string]string, len(meta))
		}
		info.Metadata[m.Key] = m.Value
		if m.Key == KeyRetryAfter {
			cerr.Meta().Set("Retry-After", m.Value)
		}
	}
	// ErrorInfo always marshals: the error is impossible.
	if d, derr := connect.NewErrorDetail(info); derr == nil {
		cerr.AddDetail(d)
	}
	return cerr
}

// InfoOf is the ErrorInfo of this API's domain on err (a *connect.Error
// as a client or handler sees it), or nil.
func InfoOf(err error) *errdetails.ErrorInfo {
	cerr, ok := errors.AsType[*connect.Error](err)
	if !ok {
		return nil
	}
	for _, d := range cerr.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
				return info
			}
		}
	}
	return nil
}

// ReasonOf is the reason of err's ErrorInfo; "" without one.
func ReasonOf(err error) Reason { return Reason(InfoOf(err).GetReason()) }

// InfoOfREST is the ErrorInfo of this API's domain in a REST error body
// (a JSON google.rpc.Status), or nil: what a REST client reads instead
// of the message.
func InfoOfREST(body []byte) *errdetails.ErrorInfo {
	var status struct {
		Details []struct {
			Type     string            `json:"@type"`
			Reason   string            `json:"reason"`
			Domain   string            `json:"domain"`
			Metadata map[string]string `json:"metadata"`
		} `json:"details"`
	}
	if json.Unmarshal(body, &status) != nil {
		return nil
	}
	for _, d := range status.Details {
		if d.Type == errorInfoType && d.Domain == Domain {
			return &errdetails.ErrorInfo{Reason: d.Reason, Domain: d.Domain, Metadata: d.Metadata}
		}
	}
	return nil
}

// errorInfoType is the @type of an ErrorInfo in JSON.
const errorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"
