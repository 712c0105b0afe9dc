//! Facts about the running process an application reports: who runs it, where, and its
//! peak resident memory.

/// The host's name (`localhost` when it cannot be read).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The user running the process (`$USER`, else `unknown`).
pub fn user_name() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// The peak resident set size of this process (Linux `VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_never_empty() {
        assert!(!host_name().is_empty());
        assert!(!user_name().is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn peak_rss_covers_a_buffer_this_test_touched() {
        let buffer = vec![1u8; 8 << 20];
        std::hint::black_box(&buffer);
        assert!(peak_rss_bytes().unwrap() >= 8 << 20);
    }
}
