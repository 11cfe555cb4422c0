//! Errors about flags name the environment variable beside the flag, since a value may have
//! come from either.

use super::flags::Cli;

/// `message` with each `--flag` its first line names followed by the environment variable
/// that sets the same option, so that a value that came from the environment is found:
/// `--max-body-bytes` becomes `--max-body-bytes (LOCKGATE_MAX_BODY_BYTES)`, and a quoted
/// `'--listen <LISTEN>'` becomes `'--listen <LISTEN>' (LOCKGATE_LISTEN)`. Each flag is
/// annotated once; hints and usage lines below the first are left as clap wrote them.
pub fn name_variables(message: &str) -> String {
    use clap::CommandFactory;
    let command = Cli::command();
    let mut commands = vec![&command];
    commands.extend(command.get_subcommands());
    let (first, rest) = message.split_once('\n').unwrap_or((message, ""));
    let mut out = first.to_owned();
    for arg in commands.iter().flat_map(|c| c.get_arguments()) {
        let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) else {
            continue;
        };
        let flag = format!("--{long}");
        let env = env.to_string_lossy();
        if out.contains(env.as_ref()) {
            continue;
        }
        // The flag as a whole word: `--max-wait` must not match inside `--max-waiters`.
        let mut from = 0;
        while let Some(found) = out[from..].find(&flag) {
            let at = from + found;
            let end = at + flag.len();
            let whole = !out[end..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-');
            if whole {
                // Inside a quoted argument syntax, after its closing quote.
                let quoted = out[..at].matches('\'').count() % 2 == 1;
                let at = match out[end..].find('\'') {
                    Some(close) if quoted => end + close + 1,
                    _ => end,
                };
                out.insert_str(at, &format!(" ({env})"));
                break;
            }
            from = end;
        }
    }
    if !rest.is_empty() {
        out.push('\n');
        out.push_str(rest);
    }
    out
}
