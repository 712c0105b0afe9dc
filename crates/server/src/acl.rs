//! Who may view which application, as Spark's history server decides it
//! (`spark.history.ui.acls.enable`): the history server's admins see every application;
//! anyone else sees an application when its own Spark settings admit them — its user, its
//! `spark.ui.view.acls` and `spark.admin.acls` (`*` admits everyone), or one of their
//! groups in `spark.ui.view.acls.groups` or `spark.admin.acls.groups`.
//!
//! The decision is made once per application in the REST API, the UI, the log download,
//! `/metrics` and the SQL tables alike: an application a viewer may not see is not
//! listed and is not found (a 404, as for an id that does not exist).

use std::sync::Arc;

use qprof_eventlog::AppInfo;

/// The history server's ACL settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclOptions {
    /// Users who see every application (Spark's `spark.history.ui.admin.acls`).
    pub admins: Vec<String>,
    /// Groups whose members see every application
    /// (`spark.history.ui.admin.acls.groups`).
    pub admin_groups: Vec<String>,
}

/// The user a request was authenticated as, and their groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Viewer {
    /// The user's name.
    pub user: String,
    /// The groups the user is in.
    pub groups: Vec<String>,
}

/// Who asks, and under which ACLs: what one request may see. The default sees everything
/// (a server without ACLs).
#[derive(Debug, Clone, Default)]
pub struct Audience {
    /// The ACLs, when the server enforces them.
    pub acls: Option<Arc<AclOptions>>,
    /// Who asks, when the server names users.
    pub viewer: Option<Viewer>,
}

/// Whether `names` admits `name`: it holds it, or `*`.
fn admits(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == "*" || n == name)
}

/// Whether `names` admits one of `groups`.
fn admits_any(names: &[String], groups: &[String]) -> bool {
    names.iter().any(|n| n == "*") || groups.iter().any(|g| names.contains(g))
}

impl Audience {
    /// Everyone sees everything.
    pub fn everyone() -> Audience {
        Audience::default()
    }

    /// Whether this audience sees every application: no ACLs, or a history admin.
    pub fn sees_all(&self) -> bool {
        let Some(acls) = &self.acls else {
            return true;
        };
        self.viewer.as_ref().is_some_and(|v| {
            admits(&acls.admins, &v.user) || admits_any(&acls.admin_groups, &v.groups)
        })
    }

    /// Whether this audience may view the application `info` describes.
    pub fn may_view(&self, info: &AppInfo) -> bool {
        if self.sees_all() {
            return true;
        }
        let Some(viewer) = &self.viewer else {
            return false;
        };
        let acls = &info.acls;
        info.user.as_deref() == Some(viewer.user.as_str())
            || admits(&acls.view, &viewer.user)
            || admits(&acls.admin, &viewer.user)
            || admits_any(&acls.view_groups, &viewer.groups)
            || admits_any(&acls.admin_groups, &viewer.groups)
    }
}

impl Audience {
    /// This audience as JSON (for a worker process that answers for the server).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "acls": self.acls.as_ref().map(|a| serde_json::json!({
                "admins": a.admins,
                "adminGroups": a.admin_groups,
            })),
            "viewer": self.viewer.as_ref().map(|v| serde_json::json!({
                "user": v.user,
                "groups": v.groups,
            })),
        })
    }

    /// An audience [`Audience::to_json`] wrote (`None` if it is not one).
    pub fn from_json(value: &serde_json::Value) -> Option<Audience> {
        let names = |v: &serde_json::Value| -> Option<Vec<String>> {
            v.as_array()?
                .iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect()
        };
        let acls = match &value["acls"] {
            serde_json::Value::Null => None,
            a => Some(Arc::new(AclOptions {
                admins: names(&a["admins"])?,
                admin_groups: names(&a["adminGroups"])?,
            })),
        };
        let viewer = match &value["viewer"] {
            serde_json::Value::Null => None,
            v => Some(Viewer {
                user: v["user"].as_str()?.to_string(),
                groups: names(&v["groups"])?,
            }),
        };
        Some(Audience { acls, viewer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qprof_eventlog::AppAcls;

    fn app(user: &str, acls: AppAcls) -> AppInfo {
        AppInfo {
            user: Some(user.into()),
            acls,
            ..AppInfo::default()
        }
    }

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_string()).collect()
    }

    fn viewer(user: &str, groups: &[&str]) -> Audience {
        Audience {
            acls: Some(Arc::new(AclOptions {
                admins: list(&["root"]),
                admin_groups: list(&["ops"]),
            })),
            viewer: Some(Viewer {
                user: user.into(),
                groups: list(groups),
            }),
        }
    }

    #[test]
    fn an_application_admits_its_user_its_acls_and_the_history_admins() {
        let private = app("ada", AppAcls::default());
        assert!(viewer("ada", &[]).may_view(&private));
        assert!(!viewer("bob", &[]).may_view(&private));
        assert!(viewer("root", &[]).may_view(&private));
        assert!(viewer("eve", &["ops"]).may_view(&private));
        let shared = app(
            "ada",
            AppAcls {
                view: list(&["bob"]),
                admin_groups: list(&["analysts"]),
                ..AppAcls::default()
            },
        );
        assert!(viewer("bob", &[]).may_view(&shared));
        assert!(viewer("carl", &["analysts"]).may_view(&shared));
        assert!(!viewer("carl", &["sales"]).may_view(&shared));
        let public = app(
            "ada",
            AppAcls {
                view: list(&["*"]),
                ..AppAcls::default()
            },
        );
        assert!(viewer("anyone", &[]).may_view(&public));
        // no user named: nothing but what no ACL guards
        let nobody = Audience {
            viewer: None,
            ..viewer("x", &[])
        };
        assert!(!nobody.may_view(&private));
        assert!(Audience::everyone().may_view(&private));
    }

    #[test]
    fn an_audience_survives_its_json() {
        for audience in [Audience::everyone(), viewer("ada", &["x", "y"])] {
            let back = Audience::from_json(&audience.to_json()).unwrap();
            assert_eq!(back.acls, audience.acls);
            assert_eq!(back.viewer, audience.viewer);
        }
    }
}
