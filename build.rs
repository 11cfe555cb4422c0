//! Two things cargo cannot see by itself:
//! * the release link reads link/cc.sh and link/hot-functions.txt (cc.sh is the linker), so a
//!   change to either relinks;
//! * what `lockgate --version` and `lockgate_build_info` say of this build: the commit, the
//!   build date and the compiler, read here from the checkout and the toolchain, never a
//!   network (`LOCKGATE_REVISION`, `LOCKGATE_BUILT`, `LOCKGATE_RUSTC` for `src/build_info.rs`).
//!
//! The commit is `git rev-parse --short=12 HEAD`, or `LOCKGATE_BUILD_REVISION` where the source
//! has no `.git` (a container build: `docker build --build-arg LOCKGATE_BUILD_REVISION=…`),
//! else `unknown`. The date is `SOURCE_DATE_EPOCH`'s when set (reproducible builds), else the
//! day this script ran (it runs again when HEAD moves or those variables change).
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo:rerun-if-changed=link/cc.sh");
    println!("cargo:rerun-if-changed=link/hot-functions.txt");
    println!("cargo:rerun-if-env-changed=LOCKGATE_BUILD_REVISION");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");

    let revision = std::env::var("LOCKGATE_BUILD_REVISION")
        .ok()
        .filter(|revision| !revision.trim().is_empty())
        .or_else(git_revision)
        .unwrap_or_else(|| "unknown".to_owned());
    // A label value and a line of `--version`: nothing but what a revision is made of.
    let revision: String = revision
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "._+-".contains(*c))
        .take(64)
        .collect();
    println!("cargo:rustc-env=LOCKGATE_REVISION={revision}");

    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|epoch| epoch.trim().parse::<u64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |now| now.as_secs())
        });
    println!("cargo:rustc-env=LOCKGATE_BUILT={}", civil_date(seconds));

    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let rustc = output(Command::new(rustc).arg("--version"))
        .and_then(|text| text.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LOCKGATE_RUSTC={rustc}");
}

/// The checkout's commit, and the files whose change means HEAD moved (HEAD itself, and the
/// branch it names), for cargo to run this script again. Only files that exist are named: cargo
/// would take a missing one as changed on every build.
fn git_revision() -> Option<String> {
    let git = |args: &[&str]| output(Command::new("git").args(args));
    let revision = git(&["rev-parse", "--short=12", "HEAD"])?;
    let branch = git(&["rev-parse", "--symbolic-full-name", "HEAD"]);
    let watched = [
        git(&["rev-parse", "--git-path", "HEAD"]),
        branch.and_then(|branch| git(&["rev-parse", "--git-path", &branch])),
        git(&["rev-parse", "--git-path", "packed-refs"]),
    ];
    for path in watched.into_iter().flatten() {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    Some(revision)
}

/// What `command` printed, trimmed, if it ran and succeeded.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned()).filter(|text| !text.is_empty())
}

/// `YYYY-MM-DD` (UTC) of `seconds` after the epoch (Howard Hinnant's days-to-civil).
fn civil_date(seconds: u64) -> String {
    let days = i64::try_from(seconds / 86_400).unwrap_or(0) + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
