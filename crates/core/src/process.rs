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

/// Puts the calling thread at the lowest scheduling priority there is, for background
/// work that should use only the CPU queries leave idle: Linux's `SCHED_IDLE` policy for
/// this thread alone (a waking query thread takes the core at once), or, where that is
/// refused, `nice` 19. The work still runs, only later when every core is busy. Returns
/// whether the priority changed.
pub fn run_at_idle_priority() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_setscheduler only reads the parameter it is given; setpriority
        // takes no pointers. On Linux, id 0 names the calling thread for both, and a
        // thread's policy and nice value are its own.
        unsafe {
            let param = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0
                || libc::setpriority(libc::PRIO_PROCESS, 0, 19) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
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

    #[cfg(target_os = "linux")]
    #[test]
    fn idle_priority_applies_to_the_calling_thread_only() {
        // SAFETY: sched_getscheduler(0) asks about the calling thread
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let before = policy();
        let changed = std::thread::spawn(move || (run_at_idle_priority(), policy()))
            .join()
            .unwrap();
        assert_eq!(changed, (true, libc::SCHED_IDLE));
        assert_eq!(policy(), before);
        assert_ne!(before, libc::SCHED_IDLE);
    }
}
