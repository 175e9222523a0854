//! The coordinator's web UI: a few static pages under `/ui/` that poll the JSON API
//! (`GET /v1/query`, `GET /v1/query/{id}`, `GET /v1/node`) from the browser and draw
//! the query list, the workers, and one query's stage DAG and tasks.
//!
//! `coordinator::router` merges [`routes`] into the coordinator's router. This module
//! owns only the pages themselves: `ui/index.html`, `ui/query.html`, `ui/app.js` and
//! `ui/style.css`, embedded in the binary with `include_str!` (no files are read at
//! run time, nothing is fetched from outside the coordinator). All data comes from the
//! existing API handlers; the pages hold no state of their own.

use std::sync::Arc;

use axum::http::header::CONTENT_TYPE;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::CoordinatorState;

const INDEX_HTML: &str = include_str!("ui/index.html");
const QUERY_HTML: &str = include_str!("ui/query.html");
const APP_JS: &str = include_str!("ui/app.js");
const STYLE_CSS: &str = include_str!("ui/style.css");

/// `GET /ui` (redirect), `/ui/`, `/ui/index.html`, `/ui/query.html`, `/ui/app.js`,
/// `/ui/style.css`.
pub fn routes() -> Router<Arc<CoordinatorState>> {
    Router::new()
        .route("/ui", get(redirect_to_ui))
        .route("/ui/", get(index_html))
        .route("/ui/index.html", get(index_html))
        .route("/ui/query.html", get(query_html))
        .route("/ui/app.js", get(app_js))
        .route("/ui/style.css", get(style_css))
}

/// Relative links in the pages (`app.js`, `query.html?...`) need the trailing slash.
async fn redirect_to_ui() -> Redirect {
    Redirect::permanent("/ui/")
}

async fn index_html() -> Html<&'static str> {
    Html(INDEX_HTML)
}

async fn query_html() -> Html<&'static str> {
    Html(QUERY_HTML)
}

async fn app_js() -> Response {
    ([(CONTENT_TYPE, "text/javascript; charset=utf-8")], APP_JS).into_response()
}

async fn style_css() -> Response {
    ([(CONTENT_TYPE, "text/css; charset=utf-8")], STYLE_CSS).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::LOCATION;
    use axum::http::StatusCode;

    #[test]
    fn pages_load_the_embedded_script_and_style() {
        for page in [INDEX_HTML, QUERY_HTML] {
            assert!(page.contains("app.js"), "page does not load app.js");
            assert!(page.contains("style.css"), "page does not load style.css");
        }
        assert!(INDEX_HTML.contains("data-page=\"index\""));
        assert!(QUERY_HTML.contains("data-page=\"query\""));
        assert!(APP_JS.contains("data-stage"));
        // Building the router checks the route paths (axum panics on bad or duplicate ones).
        let _router: Router<Arc<CoordinatorState>> = routes();
    }

    #[tokio::test]
    async fn assets_have_their_content_types() {
        let cases = [
            (index_html().await.into_response(), "text/html; charset=utf-8"),
            (query_html().await.into_response(), "text/html; charset=utf-8"),
            (app_js().await, "text/javascript; charset=utf-8"),
            (style_css().await, "text/css; charset=utf-8"),
        ];
        for (resp, content_type) in cases {
            assert_eq!(resp.status(), StatusCode::OK);
            assert_eq!(resp.headers()[CONTENT_TYPE], content_type);
        }
        let redirect = redirect_to_ui().await.into_response();
        assert!(redirect.status().is_redirection());
        assert_eq!(redirect.headers()[LOCATION], "/ui/");
    }
}
