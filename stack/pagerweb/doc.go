// Package pagerweb tests the pager's web UI as the person who got paged
// sees it: in a real headless Chromium, against a pager holding a real
// page-time heap profile of the baseline gateway and, after the resolve,
// one of the fixed gateway. It lives in the stack because it builds and
// runs two services together; the pager's own unit tests stay in its
// module.
package pagerweb
