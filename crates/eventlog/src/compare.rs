//! Comparing REST answers as Spark-compatibility checks do: fields that depend on the
//! serving host are removed, and key order counts as well as values.

use serde_json::Value;

/// Fields whose values depend on the host serving the answer, not on the log.
pub const HOST_FIELDS: [&str; 6] = [
    "logSourceName",
    "logSourceFullPath",
    "lastUpdated",
    "lastUpdatedEpoch",
    "hostPort",
    "executorLogs",
];

/// Removes [`HOST_FIELDS`] at every depth.
pub fn strip_host_fields(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for f in HOST_FIELDS {
                m.shift_remove(f);
            }
            m.values_mut().for_each(strip_host_fields);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_host_fields),
        _ => {}
    }
}

/// The first place where `got` and `want` differ (values, array lengths or key order),
/// described with its path; `None` when they are equal.
pub fn first_difference(path: &str, got: &Value, want: &Value) -> Option<String> {
    match (got, want) {
        (Value::Object(x), Value::Object(y)) => {
            let (kx, ky): (Vec<_>, Vec<_>) = (x.keys().collect(), y.keys().collect());
            if kx != ky {
                return Some(format!("{path}: keys\n  got  {kx:?}\n  want {ky:?}"));
            }
            x.iter()
                .find_map(|(k, v)| first_difference(&format!("{path}.{k}"), v, &y[k]))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (a, b))| first_difference(&format!("{path}[{i}]"), a, b)),
        _ if got == want => None,
        _ => Some(format!("{path}:\n  got  {got}\n  want {want}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn host_fields_are_ignored_and_key_order_is_not() {
        let mut a = json!({"id": 1, "hostPort": "a:1", "x": [{"lastUpdated": "t1", "v": 2}]});
        let mut b = json!({"id": 1, "hostPort": "b:2", "x": [{"lastUpdated": "t2", "v": 2}]});
        strip_host_fields(&mut a);
        strip_host_fields(&mut b);
        assert_eq!(first_difference("", &a, &b), None);
        let reordered = json!({"x": [{"v": 2}], "id": 1});
        assert!(
            first_difference("", &a, &reordered)
                .unwrap()
                .contains("keys")
        );
        let changed = json!({"id": 1, "x": [{"v": 3}]});
        assert_eq!(
            first_difference("", &a, &changed).unwrap(),
            ".x[0].v:\n  got  2\n  want 3"
        );
    }
}
