//! The web UI: one page and its script and style, embedded in the binary (no CDN, works
//! offline). The page renders everything from the JSON API in the browser.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

const INDEX: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const STYLE_CSS: &str = include_str!("../ui/style.css");

pub(crate) async fn index() -> Html<&'static str> {
    Html(INDEX)
}

pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "style.css" => (STYLE_CSS, "text/css; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}
