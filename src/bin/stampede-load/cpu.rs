//! CPU time of processes, from /proc: the generator's own and the
//! server's (`--server-pid`), for the report's CPU per request.

use std::time::Duration;

/// CPU time (user + system) a process has used so far, from /proc.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces), from field 3.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // utime and stime are fields 14 and 15, in USER_HZ (100 on Linux).
    let total = ticks(11)? + ticks(12)?;
    Some(Duration::from_millis(total * 10))
}

/// CPU time of some processes at one moment.
pub struct CpuSample(Vec<Option<Duration>>);

impl CpuSample {
    pub fn take(pids: &[u32]) -> Self {
        Self(pids.iter().map(|pid| process_cpu(*pid)).collect())
    }

    /// The CPU used in all since `before`, if every process could be read.
    pub fn since(&self, before: &Self) -> Option<Duration> {
        if self.0.is_empty() {
            return None;
        }
        self.0
            .iter()
            .zip(&before.0)
            .map(|(after, before)| Some(after.as_ref()?.saturating_sub(*before.as_ref()?)))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_used_some_cpu() {
        let spin: u64 = (0..5_000_000_u64).map(|i| i ^ (i >> 3)).sum();
        assert!(spin > 0);
        assert!(process_cpu(std::process::id()).is_some());
    }
}
