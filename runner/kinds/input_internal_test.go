package kinds

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/batonrun/baton/spec"
)

// The fields spec refuses at submit are exactly those each stock kind
// reads: a field added to a kind's input and not to spec's list would be
// refused at submit, and one spec knows that the kind does not read would
// be accepted at submit and fail on every attempt.
func TestSpecKnowsEveryStockInputField(t *testing.T) {
	t.Parallel()
	for kind, input := range map[string]any{"exec": execInput{}, "http": httpInput{}, "sleep": sleepInput{}} {
		typ := reflect.TypeOf(input)
		var read []string
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			read = append(read, name)
		}
		assert.ElementsMatch(t, read, spec.StockInputFields(kind), kind)
	}
}
