//! The web UI, embedded in the binary (no CDN, works offline): `/` serves `ui/index.html`,
//! and `/static/{file}` the style and the scripts it loads (`lib.js`, one script per page
//! under `pages/`, and the router `app.js`), by their path relative to `ui/`; any other
//! name is a 404. The page renders everything from the JSON API in the browser.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

const INDEX: &str = include_str!("../ui/index.html");

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The files under `/static/`: name relative to `ui/`, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    ("style.css", CSS, include_str!("../ui/style.css")),
    ("lib.js", JS, include_str!("../ui/lib.js")),
    ("pages/apps.js", JS, include_str!("../ui/pages/apps.js")),
    (
        "pages/application.js",
        JS,
        include_str!("../ui/pages/application.js"),
    ),
    (
        "pages/plan_graph.js",
        JS,
        include_str!("../ui/pages/plan_graph.js"),
    ),
    (
        "pages/timeline.js",
        JS,
        include_str!("../ui/pages/timeline.js"),
    ),
    ("pages/query.js", JS, include_str!("../ui/pages/query.js")),
    (
        "pages/compare.js",
        JS,
        include_str!("../ui/pages/compare.js"),
    ),
    ("pages/stage.js", JS, include_str!("../ui/pages/stage.js")),
    (
        "pages/executors.js",
        JS,
        include_str!("../ui/pages/executors.js"),
    ),
    ("app.js", JS, include_str!("../ui/app.js")),
];

pub(crate) async fn index() -> Html<&'static str> {
    Html(INDEX)
}

pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, body)) => ([(header::CONTENT_TYPE, *kind)], *body).into_response(),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}
