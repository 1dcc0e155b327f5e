package wordcopy

import "testing"

// Append appends what append does, whether it takes the words' path
// or not, and leaves dst's bytes before its end as they were.
func TestAppendIsAppend(t *testing.T) {
	src := []byte("abcdefghijklmnopqrstuvwxyz0123456789")
	for room := 0; room <= 20; room++ {
		for from := 0; from <= 20; from++ {
			for n := 0; from+n <= len(src) && n <= 20; n++ {
				// b with the rest of src after it, and b alone (its
				// array too short for a word).
				for _, b := range [][]byte{src[from : from+n], src[from : from+n : from+n]} {
					dst := append(make([]byte, 0, 3+room), "xyz"...)
					want := append([]byte("xyz"), b...)
					if got := Append(dst, b); string(got) != string(want) {
						t.Fatalf("room %d, b %q (cap %d): got %q, want %q", room, b, cap(b), got, want)
					}
				}
			}
		}
	}
}
