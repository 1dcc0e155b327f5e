// Package bearer reads the credentials of an Authorization header in the
// Bearer scheme, for every server of burnlab that takes one: the gateway
// (a tenant's API key) and the pager (Alertmanager's token).
package bearer

import "strings"

// Token returns the token of the one Authorization header in values (a
// request's Header.Values("Authorization")), or "" when there is none,
// more than one, or its scheme is not Bearer.
//
// The scheme is case-insensitive and is followed by one or more spaces
// (RFC 9110 §11.1, §11.4), so "bearer t" and "BEARER  t" are the same
// credentials as "Bearer t". Alertmanager sends its authorization.type as
// configured, and drops a notification answered 4xx for good, so a
// stricter reading would lose every page of a receiver configured with
// type: bearer. A request with two Authorization headers gets "": which
// of them counts would depend on who reads them (a proxy on the way, this
// server, a log).
func Token(values []string) string {
	if len(values) != 1 {
		return ""
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimLeft(token, " ")
}
