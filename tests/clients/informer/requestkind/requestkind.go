// Package requestkind names a request client-go's informers send by its method and URL, for the
// test clients' RoundTripper wrappers.
package requestkind

import (
	"net/http"
	"net/url"
	"strings"
)

// Classify returns list, watch, watchlist (a watch with sendInitialEvents=true), get or other,
// and the last path segment. Collections are /api/v1/[namespaces/NS/]RES and
// /apis/GROUP/VERSION/[namespaces/NS/]RES; one more segment names an object.
func Classify(u *url.URL, method string) (kind, resource string) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	resource = parts[len(parts)-1]
	collection := (parts[0] == "api" && len(parts)%2 == 1) ||
		(parts[0] == "apis" && len(parts)%2 == 0)
	q := u.Query()
	switch {
	case method != http.MethodGet:
		kind = "other"
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		kind = "watch"
		if q.Get("sendInitialEvents") == "true" {
			kind = "watchlist"
		}
	case collection:
		kind = "list"
	default:
		kind = "get"
	}
	return kind, resource
}
