package gateway_test

import (
	"os"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/pkg/edge"
)

// TestBudgetTableDocumented: the README's budget table names every budget
// with the variable and default the code has.
func TestBudgetTableDocumented(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, r := range edge.BudgetTable() {
		row := "| `" + r.Name + "` | `" + r.Variable + "` | `" + r.Default + "` |"
		if !strings.Contains(readme, row) {
			t.Errorf("README.md lacks the row %s", row)
		}
	}
}
