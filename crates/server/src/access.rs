//! Who may ask the server what, checked before any handler runs: the `Host` allow-list
//! (a DNS-rebinding page names its own host), authentication by a bearer token or by a
//! trusted reverse proxy's user header, and the security headers of every answer. The
//! CSRF rule for requests that run work is `check_work_request`, applied by those
//! handlers.
//!
//! Everything here reads request headers only, and answers a refusal with a JSON
//! message and a 4xx status, as the API's other errors.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use subtle::ConstantTimeEq;

use crate::acl::{AclOptions, Audience, Viewer};

/// The cookie a browser keeps the token in once it opened a page with `?token=`.
pub const TOKEN_COOKIE: &str = "qprof_token";

/// The header a client sends with a request that runs work (`/qprof/v1/sql`) when it does
/// not send a JSON body: a page on another site cannot send it without the server's leave.
pub const WORK_HEADER: &str = "x-requested-by";

/// Who may reach the server, and how they prove it.
#[derive(Clone, Default)]
pub struct AccessOptions {
    /// The host names a request's `Host` header may name (without the port; compared
    /// without case). Empty: any.
    pub allowed_hosts: Vec<String>,
    /// The token every request must carry (`Authorization: Bearer …`, or the cookie a
    /// page opened with `?token=…` sets). `None`: no token.
    pub token: Option<String>,
    /// The header a trusted reverse proxy names the user in (e.g. `X-Forwarded-User`):
    /// a request without it is refused. `None`: users are not named.
    pub user_header: Option<String>,
    /// The header the proxy names the user's groups in, comma-separated (e.g.
    /// `X-Forwarded-Groups`).
    pub groups_header: Option<String>,
    /// The ACLs that decide which applications a user sees ([`crate::acl`]); `None`:
    /// everyone sees every application.
    pub acls: Option<AclOptions>,
}

impl std::fmt::Debug for AccessOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessOptions")
            .field("allowed_hosts", &self.allowed_hosts)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("user_header", &self.user_header)
            .field("groups_header", &self.groups_header)
            .field("acls", &self.acls)
            .finish()
    }
}

impl AccessOptions {
    /// The host names a server bound to `bind` answers to by default: for a loopback
    /// address, the loopback names (`localhost`, `127.0.0.1`, `::1`) and nothing else, so
    /// that a page whose name resolves to the loopback address cannot read it; for any
    /// other address, any name (set [`AccessOptions::allowed_hosts`] to narrow it).
    pub fn default_hosts(bind: &str) -> Vec<String> {
        let host = bind.trim_start_matches('[').trim_end_matches(']');
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if loopback {
            ["localhost", "127.0.0.1", "::1"]
                .into_iter()
                .map(str::to_string)
                .collect()
        } else {
            Vec::new()
        }
    }
}

/// A refusal: its status and one-line message.
#[derive(Debug)]
pub(crate) struct Refused(pub StatusCode, pub String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let mut response = (self.0, axum::Json(json!({ "message": self.1 }))).into_response();
        if self.0 == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"qprof\""),
            );
        }
        response
    }
}

/// The host name of a `Host` header's value: without its port, brackets of an IPv6
/// address removed.
fn host_name(value: &str) -> &str {
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    value.rsplit_once(':').map_or(value, |(name, _)| name)
}

/// Whether `token` equals the expected one, in time that does not depend on where they
/// differ.
fn token_matches(expected: &str, token: &str) -> bool {
    expected.as_bytes().ct_eq(token.as_bytes()).into()
}

/// The token a request carries: its bearer token, else its token cookie.
fn request_token(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    bearer.or_else(|| {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == TOKEN_COOKIE)
            .map(|(_, value)| value)
    })
}

/// The `token` parameter of a query string, if any.
fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "token")
        .map(|(_, value)| value)
}

/// Checks a request against `options`: its host, its token, its user; puts its
/// [`Audience`] in its extensions.
fn admit(
    options: &AccessOptions,
    acls: Option<&Arc<AclOptions>>,
    request: &mut Request,
) -> Result<Option<Response>, Refused> {
    let headers = request.headers();
    if !options.allowed_hosts.is_empty() {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| request.uri().authority().map(|a| a.as_str()))
            .map(host_name);
        let known = host.is_some_and(|h| {
            options
                .allowed_hosts
                .iter()
                .any(|a| a.eq_ignore_ascii_case(h))
        });
        if !known {
            return Err(Refused(
                StatusCode::FORBIDDEN,
                format!(
                    "this server does not answer to the host '{}' (--allowed-host)",
                    host.unwrap_or("")
                        .chars()
                        .filter(|c| !c.is_control())
                        .take(100)
                        .collect::<String>()
                ),
            ));
        }
    }
    if let Some(expected) = &options.token {
        let carried = request_token(headers).is_some_and(|t| token_matches(expected, t));
        if !carried {
            // a page opened with ?token=: the token kept in a cookie, the page again
            // without it in its address
            let asked = query_token(request.uri().query());
            if let Some(token) = asked.filter(|t| token_matches(expected, t)) {
                return Ok(Some(token_redirect(request, token)));
            }
            return Err(Refused(
                StatusCode::UNAUTHORIZED,
                "this server needs its token: send 'Authorization: Bearer TOKEN', or open a page with ?token=TOKEN once"
                    .into(),
            ));
        }
    }
    let mut viewer = None;
    if let Some(name) = &options.user_header {
        let user = headers
            .get(name.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_string);
        let Some(user) = user else {
            return Err(Refused(
                StatusCode::UNAUTHORIZED,
                format!("no user named in the request's '{name}' header"),
            ));
        };
        let groups = options
            .groups_header
            .as_ref()
            .and_then(|g| headers.get(g.as_str()))
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .take(1024)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        viewer = Some(Viewer { user, groups });
    }
    request.extensions_mut().insert(Audience {
        acls: acls.cloned(),
        viewer,
    });
    Ok(None)
}

/// A redirect to `request`'s page without its `token` parameter, setting the token cookie.
fn token_redirect(request: &Request, token: &str) -> Response {
    let query: Vec<&str> = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("token="))
        .collect();
    let mut location = request.uri().path().to_string();
    if !query.is_empty() {
        location.push('?');
        location.push_str(&query.join("&"));
    }
    let cookie = format!("{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let (Ok(location), Ok(cookie)) = (
        HeaderValue::from_str(&location),
        HeaderValue::from_str(&cookie),
    ) {
        headers.insert(header::LOCATION, location);
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// What [`crate::guarded`] keeps: the options, and the ACLs shared by every request.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) options: AccessOptions,
    pub(crate) acls: Option<Arc<AclOptions>>,
}

/// The middleware [`crate::guarded`] puts in front of every route.
pub(crate) async fn guard(
    State(guard): State<Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    match admit(&guard.options, guard.acls.as_ref(), &mut request) {
        Ok(Some(redirect)) => redirect,
        Ok(None) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

/// The content security policy of the UI's pages and the API's answers: scripts and
/// styles from the server only (style attributes allowed: the UI sizes bars with them),
/// no frames, no plugins, no form posts elsewhere.
const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The policy of an SVG flame graph: its own inline script and style (inferno's), and
/// nothing from anywhere.
const SVG_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'self'";

/// Adds the security headers to an answer: its content security policy, no content-type
/// sniffing, no framing by other sites, no referrer sent on.
pub(crate) async fn security_headers(mut response: Response) -> Response {
    let svg = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"image/svg+xml"));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(if svg { SVG_POLICY } else { PAGE_POLICY }),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        HeaderValue::from_static(if svg { "SAMEORIGIN" } else { "DENY" }),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// The CSRF rule of a request that runs work: a browser on another site must not be able
/// to send it. It must come from no site or this one (`Sec-Fetch-Site`, `Origin`), and
/// carry what a plain form or a "simple" cross-site request cannot: a JSON body, or the
/// [`WORK_HEADER`].
pub(crate) fn check_work_request(headers: &HeaderMap, json_body: bool) -> Result<(), Refused> {
    let forbidden = |why: &str| Err(Refused(StatusCode::FORBIDDEN, why.to_string()));
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if fetch_site.is_some_and(|s| s != "same-origin" && s != "none") {
        return forbidden("a statement from another site's page is refused");
    }
    // a browser that says where the request comes from is believed; an older one is
    // judged by its origin against the host it asked (or the one a proxy was asked)
    if fetch_site.is_none()
        && let Some(origin) = headers.get(header::ORIGIN)
    {
        let origin_host = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .map(|(_, rest)| rest);
        let asked = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let same = origin_host
            .is_some_and(|o| asked("host") == Some(o) || asked("x-forwarded-host") == Some(o));
        if !same {
            return forbidden("a statement from another origin is refused");
        }
    }
    let content_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("application/json"));
    let proven = (json_body && content_json) || headers.contains_key(WORK_HEADER);
    if !proven {
        return forbidden(
            "a statement without a JSON body (Content-Type: application/json) or the header 'X-Requested-By' is refused: a page of another site could send it",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_is_read_without_its_port() {
        assert_eq!(host_name("localhost:18080"), "localhost");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("[::1]:18080"), "::1");
        assert_eq!(host_name("evil.example:80"), "evil.example");
    }

    #[test]
    fn loopback_binds_answer_to_loopback_names_only() {
        assert_eq!(
            AccessOptions::default_hosts("127.0.0.1"),
            ["localhost", "127.0.0.1", "::1"]
        );
        assert_eq!(AccessOptions::default_hosts("::1").len(), 3);
        assert!(AccessOptions::default_hosts("0.0.0.0").is_empty());
        assert!(AccessOptions::default_hosts("10.1.2.3").is_empty());
    }

    #[test]
    fn a_token_is_read_from_the_bearer_header_or_the_cookie() {
        let mut headers = HeaderMap::new();
        assert_eq!(request_token(&headers), None);
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; qprof_token=s3cret"),
        );
        assert_eq!(request_token(&headers), Some("s3cret"));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer other"),
        );
        assert_eq!(request_token(&headers), Some("other"));
        assert!(token_matches("s3cret", "s3cret"));
        assert!(!token_matches("s3cret", "s3cre"));
        assert!(!token_matches("s3cret", "s3creT"));
    }
}
