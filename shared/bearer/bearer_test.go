package bearer

import "testing"

func TestToken(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   string
	}{
		{[]string{"Bearer s3cret"}, "s3cret"},
		{[]string{"bearer s3cret"}, "s3cret"},
		{[]string{"BEARER s3cret"}, "s3cret"},
		{[]string{"Bearer   s3cret"}, "s3cret"},
		{[]string{"Basic czNjcmV0"}, ""},
		{[]string{"Bearers3cret"}, ""},
		{[]string{"Bearer a", "Bearer b"}, ""},
		{nil, ""},
	} {
		if got := Token(c.values); got != c.want {
			t.Errorf("Token(%q) = %q, want %q", c.values, got, c.want)
		}
	}
}
