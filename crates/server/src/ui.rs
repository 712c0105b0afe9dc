//! The web UI, embedded in the binary (no CDN, works offline): `/` serves `ui/index.html`
//! with a `<script>` for each script of [`ASSETS`], in its order, and `/static/{file}` the
//! style and the scripts (`lib.js`, one script per page under `pages/`, and the router
//! `app.js`), by their path relative to `ui/`; any other name is a 404. The page renders
//! everything from the JSON API in the browser. A new page is its script and one line of
//! [`ASSETS`].

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

const INDEX: &str = include_str!("../ui/index.html");

/// Where `index.html` takes its scripts.
const SCRIPTS_MARK: &str = "<!-- scripts: each script of the server's asset list, in its order -->";

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The files under `/static/`: name relative to `ui/`, content type, content. The scripts
/// load in this order: `lib.js` first, each page, the router `app.js` last.
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
    ("pages/sql.js", JS, include_str!("../ui/pages/sql.js")),
    ("pages/stage.js", JS, include_str!("../ui/pages/stage.js")),
    (
        "pages/executors.js",
        JS,
        include_str!("../ui/pages/executors.js"),
    ),
    ("app.js", JS, include_str!("../ui/app.js")),
];

/// `index.html` with its scripts.
fn index_html() -> &'static str {
    static HTML: OnceLock<String> = OnceLock::new();
    HTML.get_or_init(|| {
        let scripts: String = ASSETS
            .iter()
            .filter(|(_, kind, _)| *kind == JS)
            .map(|(name, _, _)| format!("<script src=\"static/{name}\"></script>\n"))
            .collect();
        INDEX.replace(&format!("{SCRIPTS_MARK}\n"), &scripts)
    })
}

pub(crate) async fn index() -> Html<&'static str> {
    Html(index_html())
}

pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, body)) => ([(header::CONTENT_TYPE, *kind)], *body).into_response(),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `ui/` is served, and the page loads every script.
    #[test]
    fn every_ui_file_is_an_asset_and_every_script_loads() {
        fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, out);
                } else {
                    out.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
        let mut files = Vec::new();
        walk(&root, &root, &mut files);
        for file in files.iter().filter(|f| *f != "index.html") {
            assert!(
                ASSETS.iter().any(|(name, _, _)| name == file),
                "{file} is not served"
            );
        }
        let html = index_html();
        assert!(!html.contains(SCRIPTS_MARK));
        let scripts: Vec<&str> = html
            .match_indices("<script src=\"static/")
            .map(|(at, _)| html[at..].split('"').nth(1).unwrap())
            .collect();
        let want: Vec<String> = ASSETS
            .iter()
            .filter(|(name, _, _)| name.ends_with(".js"))
            .map(|(name, _, _)| format!("static/{name}"))
            .collect();
        assert_eq!(scripts, want);
        assert_eq!(scripts.first().copied(), Some("static/lib.js"));
        assert_eq!(scripts.last().copied(), Some("static/app.js"));
    }
}
