package echomw_test

// A test from an outside review of issue 26 (cost settled after the
// response). It fails on the code it was written against: see the commit
// that added it.

import (
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

// TestFinalCostGetsTheStatusACustomErrorHandlerSends: WithFinalCost's f is
// "given the status sent". An application whose HTTPErrorHandler answers
// its own error type (here errWrongPassword) with 401 is the README's
// failed-login recipe on echo: f must see the 401 the client gets, or no
// failed login is ever counted.
func TestFinalCostGetsTheStatusACustomErrorHandlerSends(t *testing.T) {
	errWrongPassword := errors.New("wrong password")
	var got []int
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if errors.Is(err, errWrongPassword) {
			_ = c.String(http.StatusUnauthorized, "wrong password")
			return
		}
		e.DefaultHTTPErrorHandler(err, c)
	}
	e.POST("/login", func(echo.Context) error { return errWrongPassword },
		limit(t, newLim(t, 10), nethttp.WithFinalCost(func(status int, _ http.Header, charged int64) int64 {
			got = append(got, status)
			return charged
		})))
	w := send(e, http.MethodPost, "/login")
	wantCode(t, w, http.StatusUnauthorized)
	if !reflect.DeepEqual(got, []int{http.StatusUnauthorized}) {
		t.Errorf("statuses given to the WithFinalCost function: %v; the client got %d", got, w.Code)
	}
}
