package promfacts

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/common/model"

	"burnlab/pager/internal/heapdelta"
)

// The gateway's stream-length series: the histogram's _sum is Σn over the
// streams that ended, n being a stream's events, and the counter Σn².
const (
	lengthSum     = heapdelta.LengthHistogram + "_sum"
	lengthSquares = heapdelta.LengthSquares
)

// NoLengths says why a growth fit has no stream counts at all.
const NoLengths = "Prometheus holds no " + lengthSum + " or " + lengthSquares + " over the delta windows: a gateway older than this pager, or one it does not scrape"

// StreamLengths are Σn and Σn² over the gateway's streams that ended from
// from to to (a delta profile's window): each series' increase over the
// window, summed over the gateway's instances. Several instances scale
// both sums alike, which the growth fit's slope does not see. ok is false
// when Prometheus has no figure for the window (too few scrapes in it, or
// no series).
func (c *Client) StreamLengths(ctx context.Context, from, to time.Time) (sumN, sumN2 float64, ok bool, err error) {
	window := model.Duration(to.Sub(from).Round(time.Millisecond))
	if window <= 0 {
		return 0, 0, false, fmt.Errorf("stream lengths: the window %s to %s is empty", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	var out [2]float64
	for i, name := range []string{lengthSum, lengthSquares} {
		v, err := c.instant(ctx, fmt.Sprintf("sum(increase(%s[%s]))", name, window), to)
		if err != nil {
			return 0, 0, false, fmt.Errorf("stream lengths: %w", err)
		}
		if v == nil {
			return 0, 0, false, nil
		}
		out[i] = *v
	}
	return out[0], out[1], true, nil
}
