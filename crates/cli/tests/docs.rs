//! The user guide in `docs/`: every chapter is in its summary, every link between pages
//! (and from the README into the guide) leads to a page and heading that exist, and the
//! book mdBook builds opens in headless Chromium with the metrics reference generated
//! from the catalog.
//!
//! Needs what `scripts/install-test-deps.sh` installs (mdBook in `target/test-tools`,
//! Chromium).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::served::{chromium, temp_dir};

mod common;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn guide() -> PathBuf {
    root().join("docs/src")
}

/// The Markdown pages under `dir`, as paths relative to it.
fn pages(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.insert(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out
}

/// The targets of the inline links of a Markdown text, outside code blocks and spans.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // code spans hold no links
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect();
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// The anchors mdBook gives a page's headings: lower case, spaces as `-`, other
/// punctuation dropped.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_block = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        }
        if in_block || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let anchor: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        out.insert(anchor);
    }
    out
}

/// Every relative link of `page` (a file under `base`) leads to a file, and its anchor to
/// a heading of that file.
fn check_links(page: &Path, problems: &mut Vec<String>) {
    let text = std::fs::read_to_string(page).unwrap();
    for link in links(&text) {
        if link.starts_with("http://") || link.starts_with("https://") {
            continue;
        }
        let (file, anchor) = link.split_once('#').unwrap_or((link.as_str(), ""));
        let target = if file.is_empty() {
            page.to_path_buf()
        } else {
            page.parent().unwrap().join(file)
        };
        if !target.exists() {
            problems.push(format!("{}: {link} leads nowhere", page.display()));
            continue;
        }
        if !anchor.is_empty() {
            let heads = anchors(&std::fs::read_to_string(&target).unwrap_or_default());
            if !heads.contains(anchor) {
                problems.push(format!("{}: {link} has no such heading", page.display()));
            }
        }
    }
}

#[test]
fn the_summary_lists_every_chapter_and_no_other() {
    let summary = std::fs::read_to_string(guide().join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary).into_iter().map(PathBuf::from).collect();
    let mut on_disk = pages(&guide());
    on_disk.remove(Path::new("SUMMARY.md"));
    assert_eq!(listed, on_disk);
}

#[test]
fn every_link_of_the_guide_and_the_readme_leads_somewhere() {
    let mut problems = Vec::new();
    for page in pages(&guide()) {
        check_links(&guide().join(page), &mut problems);
    }
    check_links(&root().join("README.md"), &mut problems);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_broken_link_is_found() {
    let dir = temp_dir("docs-links");
    std::fs::write(
        dir.join("a.md"),
        "# A page\n\nSee [b](b.md) and [the top](#a-page).\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("c.md"),
        "[gone](nowhere.md), [no head](a.md#missing)\n",
    )
    .unwrap();
    let mut problems = Vec::new();
    check_links(&dir.join("a.md"), &mut problems);
    check_links(&dir.join("c.md"), &mut problems);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("b.md leads nowhere"));
    assert!(problems[1].contains("nowhere.md leads nowhere"));
    assert!(problems[2].contains("a.md#missing has no such heading"));
}

/// mdBook, as `scripts/install-test-deps.sh` installs it.
fn mdbook() -> PathBuf {
    let path = root().join("target/test-tools/bin/mdbook");
    assert!(
        path.exists(),
        "mdbook is missing: run scripts/install-test-deps.sh first"
    );
    path
}

#[test]
fn the_book_builds_and_its_metrics_reference_opens_in_chromium() {
    let out_dir = temp_dir("book");
    let build = Command::new(mdbook())
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "mdbook build failed: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    let page = out_dir.join("reference/metrics.html");
    let dom = chromium(&["--dump-dom"], &format!("file://{}", page.display()));
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("Metrics reference"), "{dom}");
    // each of the catalog's metrics has its row, in a table the browser built
    let rows = dom.matches("<tr>").count();
    let metrics = qprof_core::catalog::ALL.len();
    assert!(rows > metrics, "{rows} table rows for {metrics} metrics");
    for def in qprof_core::catalog::ALL {
        assert!(
            dom.contains(&format!(">{}</code>", def.name)),
            "{} is not on the page",
            def.name
        );
    }
    // the guide's navigation lists every chapter
    for chapter in [
        "Getting started",
        "On a Ballista cluster",
        "Spark compatibility",
    ] {
        assert!(
            dom.contains(chapter),
            "{chapter} missing from the navigation"
        );
    }
}
