package gateway

import (
	"context"

	"github.com/labstack/echo/v4"
)

// WithRoutes returns ctx for Run, which then gives f every route it
// registered.
func WithRoutes(ctx context.Context, f func([]*echo.Route)) context.Context {
	return context.WithValue(ctx, routesKey{}, f)
}
