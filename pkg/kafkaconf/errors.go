package kafkaconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/errclass"
)

// Classify is the one place where Kafka errors are sorted:
//   - Unavailable when trying again later can succeed: the broker is down,
//     slow or electing a leader, kgo gave up on a record's delivery or
//     buffer, or our own deadline ran out;
//   - Rejected when the broker refuses this record for good (too large,
//     invalid);
//   - Permanent when it refuses us for good (authorization, SASL,
//     an unsupported request), when TLS cannot be established (an
//     untrusted or mismatched certificate, a refused client certificate,
//     TLS against a plaintext listener) or the connection config is
//     invalid (ErrConfig): repeating cannot fix a wrong password, CA or
//     certificate. These win over a timeout that wraps them (kgo's
//     "records have timed out ..., last err: ..." names the cause);
//   - Canceled when the client is closed or the caller gave up.
//
// An error that is none of these is a connection or protocol failure,
// which kgo's own IsRetryableBrokerErr and an unknown failure both treat as
// transient: at worst a record is retried until an operator looks, never
// dropped.
func Classify(err error) errclass.Class {
	switch {
	case err == nil:
		return errclass.None
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled):
		return errclass.Canceled
	case refusedForGood(err):
		return errclass.Permanent
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, kgo.ErrMaxBuffered), errors.Is(err, context.DeadlineExceeded):
		return errclass.Unavailable
	}
	ke, ok := errors.AsType[*kerr.Error](err)
	switch {
	case !ok, ke.Retriable:
		return errclass.Unavailable
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.InvalidRecord),
		errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRequiredAcks):
		return errclass.Rejected
	}
	return errclass.Permanent
}

// refusedForGood reports the security failures no retry can fix: a
// misconfiguration, SASL refused, authorization denied, or a TLS
// certificate that does not verify on either side.
func refusedForGood(err error) bool {
	if errors.Is(err, ErrConfig) {
		return true
	}
	for _, ke := range []*kerr.Error{
		kerr.SaslAuthenticationFailed, kerr.IllegalSaslState, kerr.UnsupportedSaslMechanism,
		kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed,
	} {
		if errors.Is(err, ke) {
			return true
		}
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		// TLS to a listener that does not speak it.
		return true
	}
	// The broker refused our certificate (or its absence) with a TLS alert:
	// crypto/tls reports it as a "remote error" whose text names it.
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "remote error" && op.Err != nil {
		msg := op.Err.Error()
		if strings.HasPrefix(msg, "tls: ") && (strings.Contains(msg, "certificate") || strings.Contains(msg, "unknown certificate authority")) {
			return true
		}
	}
	if alert, ok := errors.AsType[tls.AlertError](err); ok {
		switch alert {
		case 42, 43, 44, 45, 46, 48, 116: // bad, unsupported, revoked, expired, unknown certificate; unknown CA; certificate required
			return true
		}
	}
	return false
}
