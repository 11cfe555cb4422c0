//! What every Prometheus exporter reports about itself: `lockgate_build_info` and the
//! standard `process_*` metrics (CPU time, resident and virtual memory, open and maximum file
//! descriptors, start time), read from `/proc` at scrape time. On systems without `/proc` only
//! the build info is written. Nothing here is kept between scrapes.

use std::fmt::Write;

use crate::build_info;

/// Kernel clock ticks per second in `/proc/*/stat` (USER_HZ: 100 on every Linux platform).
const TICKS_PER_SECOND: f64 = 100.0;

/// Appends the build info and the process metrics to an exposition.
pub fn render(out: &mut String) {
    let _ = write!(
        out,
        "# HELP lockgate_build_info The lockgate build serving, as labels; always 1.\n\
         # TYPE lockgate_build_info gauge\n\
         lockgate_build_info{{version=\"{}\",revision=\"{}\",built=\"{}\",rustc=\"{}\"}} 1\n",
        build_info::VERSION,
        build_info::REVISION,
        build_info::BUILT,
        build_info::RUSTC,
    );
    if let Some(process) = Process::read() {
        process.render(out);
    }
}

/// One reading of `/proc/self`.
#[derive(Debug, PartialEq)]
struct Process {
    cpu_seconds: f64,
    start_time_seconds: f64,
    virtual_bytes: u64,
    resident_bytes: u64,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
}

impl Process {
    fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let boot_time = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| field_after(&text, "btime"));
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|dir| dir.count() as u64);
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|text| max_open_files(&text));
        Self::parse(&stat, &status, boot_time?, open_fds, max_fds)
    }

    fn parse(
        stat: &str,
        status: &str,
        boot_time: u64,
        open_fds: Option<u64>,
        max_fds: Option<u64>,
    ) -> Option<Self> {
        // The command name (field 2) is in parentheses and may hold spaces: count from after it.
        let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
        // Fields 14 (utime), 15 (stime), 22 (starttime), 23 (vsize), numbered from 1; the
        // slice starts at field 3.
        let number = |field: usize| fields.get(field - 3)?.parse::<u64>().ok();
        let cpu_ticks = number(14)? + number(15)?;
        let start_ticks = number(22)?;
        let resident_kib = field_after(status, "VmRSS:")?;
        Some(Self {
            cpu_seconds: cpu_ticks as f64 / TICKS_PER_SECOND,
            start_time_seconds: boot_time as f64 + start_ticks as f64 / TICKS_PER_SECOND,
            virtual_bytes: number(23)?,
            resident_bytes: resident_kib * 1024,
            open_fds,
            max_fds,
        })
    }

    fn render(&self, out: &mut String) {
        let _ = write!(
            out,
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
             # TYPE process_cpu_seconds_total counter\n\
             process_cpu_seconds_total {}\n\
             # HELP process_resident_memory_bytes Resident memory size in bytes.\n\
             # TYPE process_resident_memory_bytes gauge\n\
             process_resident_memory_bytes {}\n\
             # HELP process_virtual_memory_bytes Virtual memory size in bytes.\n\
             # TYPE process_virtual_memory_bytes gauge\n\
             process_virtual_memory_bytes {}\n\
             # HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n\
             # TYPE process_start_time_seconds gauge\n\
             process_start_time_seconds {}\n",
            self.cpu_seconds, self.resident_bytes, self.virtual_bytes, self.start_time_seconds
        );
        if let Some(open) = self.open_fds {
            let _ = write!(
                out,
                "# HELP process_open_fds Number of open file descriptors.\n\
                 # TYPE process_open_fds gauge\n\
                 process_open_fds {open}\n"
            );
        }
        if let Some(max) = self.max_fds {
            let _ = write!(
                out,
                "# HELP process_max_fds Maximum number of open file descriptors.\n\
                 # TYPE process_max_fds gauge\n\
                 process_max_fds {max}\n"
            );
        }
    }
}

/// The first number after `label` at the start of a line (`btime 1700000000`, `VmRSS:  9876 kB`).
fn field_after(text: &str, label: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

/// The soft limit of `Max open files` in `/proc/self/limits` (`unlimited` gives none).
fn max_open_files(limits: &str) -> Option<u64> {
    limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_parsed() {
        let stat = "4242 (lock gate) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 \
                    4 0 12345 98765432 2000 18446744073709551615";
        let status = "Name:\tlockgate\nVmPeak:\t  99999 kB\nVmRSS:\t    9876 kB\n";
        let process =
            Process::parse(stat, status, 1_700_000_000, Some(12), Some(1024)).expect("parsed");
        assert_eq!(
            process,
            Process {
                cpu_seconds: 3.0,
                start_time_seconds: 1_700_000_123.45,
                virtual_bytes: 98_765_432,
                resident_bytes: 9876 * 1024,
                open_fds: Some(12),
                max_fds: Some(1024),
            }
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read() {
        let mut out = String::new();
        render(&mut out);
        let build = format!(
            "lockgate_build_info{{version=\"{}\",revision=\"{}\",built=\"{}\",rustc=\"{}\"}} 1\n",
            build_info::VERSION,
            build_info::REVISION,
            build_info::BUILT,
            build_info::RUSTC
        );
        assert!(out.contains(&build), "{out}");
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_start_time_seconds ",
            "process_open_fds ",
        ] {
            assert!(out.contains(name), "{name} missing: {out}");
        }
    }
}
