package apierr

// Domain is the ErrorInfo domain of every refusal of the receipts API.
const Domain = "receipts.v1"

// Reason is the stable, machine-readable cause of a refusal: the reason of
// its google.rpc.ErrorInfo. Clients branch on it, never on the message.
// The values never change meaning; a new cause gets a new reason. The
// API reference (README, "Errors") lists them with their codes.
type Reason string

// The reasons. Each says what was refused and what the caller can do.
const (
	// InvalidID: an id is missing, too long, or holds a character ids may
	// not (field names it). Fix the request.
	InvalidID Reason = "INVALID_ID"
	// InvalidSeq: a seq is out of range (≤ 0 where a message is meant, < 0
	// for a join point). Fix the request.
	InvalidSeq Reason = "INVALID_SEQ"
	// InvalidEpoch: an epoch is negative or over the limit. Fix the request.
	InvalidEpoch Reason = "INVALID_EPOCH"
	// InvalidKind: a mark's kind is missing, unknown, or not READ or
	// DELIVERED. Fix the request.
	InvalidKind Reason = "INVALID_KIND"
	// InvalidField: another field's value is outside what the call takes
	// (a private DELIVERED mark, a page size or token, a resume token).
	InvalidField Reason = "INVALID_FIELD"
	// InvalidLevel: a notification level is not "all", "mentions", "none"
	// (or, where it may be, ""). Fix the request.
	InvalidLevel Reason = "INVALID_LEVEL"
	// EmptyRequest: the call has nothing to do (an empty batch, no
	// setting to change, nothing to look up). Fix the request.
	EmptyRequest Reason = "EMPTY_REQUEST"
	// BatchTooLarge: a list holds more items than its limit (metadata
	// "limit"). Split the call.
	BatchTooLarge Reason = "BATCH_TOO_LARGE"
	// BodyTooLarge: the request body is over the server's byte limit
	// (metadata "limit"). Split the call.
	BodyTooLarge Reason = "BODY_TOO_LARGE"
	// MalformedRequest: the body is not valid JSON, or cannot be read.
	MalformedRequest Reason = "MALFORMED_REQUEST"
	// HeadBehind: a mark is beyond the channel head the service knows:
	// its message's notice has not arrived yet. Aborted (HTTP 409) with
	// Retry-After: the same call succeeds once the notice is in.
	HeadBehind Reason = "HEAD_BEHIND"
	// SeqBeyondHead: a join point is beyond the channel's head. Fix the
	// request (or notify the message first).
	SeqBeyondHead Reason = "SEQ_BEYOND_HEAD"
	// DeletionBeyondHead: a deleted seq is further beyond the channel's
	// (or thread's) head than a delete may run ahead of its notice
	// (metadata "head" and "limit"): a seq from another id space, or a
	// mistake. Fix the request (or notify the message first).
	DeletionBeyondHead Reason = "DELETION_BEYOND_HEAD"
	// EpochAhead: a mark's explicit epoch is ahead of the stored read
	// epoch; send an epoch a read answered.
	EpochAhead Reason = "EPOCH_AHEAD"
	// StaleEpoch: a mark's explicit epoch is older than the stored read
	// epoch (a mark-unread came after it): it changed nothing. Read the
	// state again. A per-mark result (ReceiptResult.reason), not an error.
	StaleEpoch Reason = "STALE_EPOCH"
	// EpochLimit: mark-unread on a cursor whose read epoch is at its limit.
	EpochLimit Reason = "EPOCH_LIMIT"
	// NotAMember: the user is not a member of a channel that has
	// registered members (metadata "field"). A dropped mention has the
	// same cause, and so has an end-user token's watch or receipt read of
	// a channel its user is not a member of (metadata "field" and
	// "scope": what a server token would need).
	NotAMember Reason = "NOT_A_MEMBER"
	// NotYourUser: an end-user token names another user than the one it
	// acts for (metadata "field"; "scope": what a server token would
	// need). An end-user token acts on its own user only.
	NotYourUser Reason = "NOT_YOUR_USER"
	// CredentialsMissing: the call carries no bearer token or client
	// certificate, and the API requires one.
	CredentialsMissing Reason = "CREDENTIALS_MISSING"
	// CredentialsInvalid: the bearer token is malformed or not accepted
	// (an end-user token: a bad signature, key, audience, issuer or
	// time, the message says which).
	CredentialsInvalid Reason = "CREDENTIALS_INVALID"
	// CredentialsExpired: the end-user token's exp has passed; get a new
	// token, then retry.
	CredentialsExpired Reason = "CREDENTIALS_EXPIRED"
	// ScopeMissing: the caller lacks the scope the call needs (metadata
	// "scope").
	ScopeMissing Reason = "SCOPE_MISSING"
	// RateLimited: the caller's rate limit is spent; retry after
	// Retry-After.
	RateLimited Reason = "RATE_LIMITED"
	// StreamLimit: too many watch streams (of the caller, or on the
	// replica); retry after Retry-After, or on another replica.
	StreamLimit Reason = "STREAM_LIMIT"
	// Unavailable: a store the call needs cannot answer now; nothing was
	// acknowledged. Retry (after Retry-After when given); a watch stream
	// resumes with its last token.
	Unavailable Reason = "UNAVAILABLE"
	// NotEnabled: the call is not enabled on this gateway (watch streams).
	NotEnabled Reason = "NOT_ENABLED"
	// DeadlineExceeded: the caller's own deadline passed first.
	DeadlineExceeded Reason = "DEADLINE_EXCEEDED"
	// Canceled: the caller canceled the call.
	Canceled Reason = "CANCELED"
	// Internal: a bug of the service; report it.
	Internal Reason = "INTERNAL"
)

// Reasons is every reason, in the order of the API reference.
var Reasons = []Reason{
	InvalidID, InvalidSeq, InvalidEpoch, InvalidKind, InvalidField, InvalidLevel, EmptyRequest,
	BatchTooLarge, BodyTooLarge, MalformedRequest, HeadBehind, SeqBeyondHead,
	DeletionBeyondHead, EpochAhead, StaleEpoch, EpochLimit, NotAMember, NotYourUser, CredentialsMissing,
	CredentialsInvalid, CredentialsExpired, ScopeMissing, RateLimited, StreamLimit, Unavailable,
	NotEnabled, DeadlineExceeded, Canceled, Internal,
}

// Metadata keys of the ErrorInfo.
const (
	// KeyField names the offending field, in the request's own terms
	// ("receipts[3].seq").
	KeyField = "field"
	// KeyLimit is the limit a too-large list or body is over.
	KeyLimit = "limit"
	// KeyHead is the channel head the service knows (HEAD_BEHIND,
	// SEQ_BEYOND_HEAD).
	KeyHead = "head"
	// KeyScope is the scope a call lacks (SCOPE_MISSING), or the one a
	// server token would need for what an end-user token may not do
	// (NOT_YOUR_USER, NOT_A_MEMBER).
	KeyScope = "scope"
	// KeyRetryAfter is the retry delay in whole seconds, as the
	// Retry-After header says it.
	KeyRetryAfter = "retry_after_seconds"
)
