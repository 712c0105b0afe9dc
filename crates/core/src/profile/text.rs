//! An operator's one-line description, which may be rendered only when first read.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// Renders an operator's description on demand; holds only what the rendering needs.
pub trait RenderText: Send + Sync {
    /// The description.
    fn render(&self) -> String;
}

/// An operator's one-line description as EXPLAIN prints it. Reads as a `&str`; a text
/// made with [`OperatorText::lazy`] is rendered the first time it is read (once, whoever
/// reads it), so a profile nobody prints never pays for it.
#[derive(Clone, Default)]
pub struct OperatorText(Arc<Inner>);

#[derive(Default)]
struct Inner {
    text: OnceLock<String>,
    render: Option<Box<dyn RenderText>>,
}

impl OperatorText {
    /// A text rendered when first read.
    pub fn lazy(render: impl RenderText + 'static) -> OperatorText {
        OperatorText(Arc::new(Inner {
            text: OnceLock::new(),
            render: Some(Box::new(render)),
        }))
    }

    /// The text (rendered now if it was not yet).
    pub fn as_str(&self) -> &str {
        self.0.text.get_or_init(|| {
            self.0
                .render
                .as_ref()
                .map(|r| r.render())
                .unwrap_or_default()
        })
    }
}

impl From<String> for OperatorText {
    fn from(text: String) -> OperatorText {
        OperatorText(Arc::new(Inner {
            text: OnceLock::from(text),
            render: None,
        }))
    }
}

impl From<&str> for OperatorText {
    fn from(text: &str) -> OperatorText {
        OperatorText::from(text.to_string())
    }
}

impl Deref for OperatorText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for OperatorText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for OperatorText {
    fn eq(&self, other: &OperatorText) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for OperatorText {}

impl PartialEq<str> for OperatorText {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for OperatorText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for OperatorText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for OperatorText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Counted(Arc<AtomicUsize>);

    impl RenderText for Counted {
        fn render(&self) -> String {
            self.0.fetch_add(1, Ordering::Relaxed);
            "DataSourceExec: file_groups={1 group}".to_string()
        }
    }

    #[test]
    fn a_lazy_text_is_rendered_once_when_first_read_by_any_clone() {
        let renders = Arc::new(AtomicUsize::new(0));
        let text = OperatorText::lazy(Counted(Arc::clone(&renders)));
        let copy = text.clone();
        assert_eq!(renders.load(Ordering::Relaxed), 0);
        assert_eq!(copy, "DataSourceExec: file_groups={1 group}");
        assert!(text.starts_with("DataSourceExec"));
        assert_eq!(renders.load(Ordering::Relaxed), 1);
        assert_eq!(
            text,
            OperatorText::from("DataSourceExec: file_groups={1 group}")
        );
    }
}
