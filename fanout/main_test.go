package fanout

import (
	"testing"

	"github.com/mdbus/mdbus/internal/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }
