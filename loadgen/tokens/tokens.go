// Package tokens makes the text a model streams: short tokens, and now and
// then a piece of PII spelled across several of them, as the gateway must
// redact it. The lab's synthetic provider and the proxy benchmark's
// upstream stream the same text.
package tokens

import (
	"math/rand/v2"
	"strconv"
)

// vocabulary is what a model streams: short tokens, most with a leading
// space. They are short on purpose: a whole chunk must stay within the
// write-up's 24–96 characters for its regexp to match.
var vocabulary = []string{
	" the", " of", " and", " to", " a", " in", " is", " it", " that", " for",
	" you", " was", " on", " are", " with", " as", " be", " this", " have", " from",
	" or", " by", " not", " but", " what", " all", " we", " can", " when", " your",
	" which", " their", " said", " if", " will", " each", " about", " how", " up", " out",
	" them", " then", " she", " many", " some", " so", " these", " would", " other", " into",
	" has", " more", " two", " like", " him", " see", " time", " could", " no", " make",
	" than", " first", " been", " its", " who", " now", " people", " my", " over", " down",
	" only", " way", " find", " use", " may", " water", " long", " little", " very", " after",
	" words", " called", " just", " where", " most", " know", " get", " through", " back", " much",
	" before", " go", " good", " new", " write", " our", " used", " me", " man", " too",
	" any", " day", " same", " right", " look", " think", " also", " around", " another", " came",
	" come", " work", " three", " must", " because", " does", " part", " even", " place", " well",
	" function", " return", " error", " value", " stream", " token", " buffer", " string", " parse", " slice",
	".", ",", ":", ";", "\n", "\n\n", " (", ")", " `", "`", "ing", "ed", "ly", "er", "s",
}

// Source draws a stream's tokens.
type Source struct {
	rng      *rand.Rand
	piiEvery int
	pending  []string // the rest of a PII item being spelled out
}

// New returns a Source drawing from rng, with a PII item about every
// piiEvery tokens (0: none).
func New(rng *rand.Rand, piiEvery int) *Source { return &Source{rng: rng, piiEvery: piiEvery} }

// Next is the stream's next token.
func (s *Source) Next() string {
	if len(s.pending) == 0 && s.piiEvery > 0 && s.rng.IntN(s.piiEvery) == 0 {
		s.pending = piiItem(s.rng)
	}
	if len(s.pending) > 0 {
		tok := s.pending[0]
		s.pending = s.pending[1:]
		return tok
	}
	return Word(s.rng)
}

// Word is one ordinary token.
func Word(rng *rand.Rand) string { return vocabulary[rng.IntN(len(vocabulary))] }

// piiItem makes one piece of PII the gateway must redact, and splits it into
// tokens, so that most items cross event boundaries.
func piiItem(rng *rand.Rand) []string {
	var s string
	switch rng.IntN(4) {
	case 0:
		s = "user" + strconv.Itoa(rng.IntN(10000)) + "@example.com"
	case 1:
		s = "+1 555 " + strconv.Itoa(100+rng.IntN(900)) + " " + strconv.Itoa(1000+rng.IntN(9000))
	case 2:
		s = testCards[rng.IntN(len(testCards))]
	default:
		b := []byte("sk-")
		for range 24 {
			b = append(b, keyChars[rng.IntN(len(keyChars))])
		}
		s = string(b)
	}
	tokens := []string{" "}
	for len(s) > 0 {
		n := min(len(s), 2+rng.IntN(5))
		tokens = append(tokens, s[:n])
		s = s[n:]
	}
	return append(tokens, " ")
}

const keyChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// testCards are the card networks' published test numbers (Luhn-valid).
var testCards = []string{"4111 1111 1111 1111", "5500 0000 0000 0004", "3400 000000 00009", "6011 0000 0000 0004"}
