// Package usercalls answers the calls about a user as a whole: the
// privacy settings (UpdateSettings, through the write step, refused
// without Redis: the read-by view must hide what the user hides before
// the call succeeds) and EraseUser.
package usercalls
