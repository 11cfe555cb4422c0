//! The `lockgate` binary: parse the configuration, set up logging, run.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use lockgate::app::StartupError;
use lockgate::config::name_variables;
use lockgate::config::{Cli, Command, Config};

/// Writes what a printing subcommand prints; a reader that stops early (`| head`) is no error
/// of ours.
fn write_out(bytes: &[u8]) -> ExitCode {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(bytes) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("error: cannot write to standard output: {err}");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

/// sysexits(3) EX_USAGE: the configuration is wrong.
const EXIT_CONFIG: u8 = 64;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let args: Vec<String> = std::env::args().skip(1).collect();
            return match err.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = err.print();
                    ExitCode::SUCCESS
                }
                // `lockgate help --help`: help about help is the help.
                ErrorKind::InvalidSubcommand
                    if args.first().is_some_and(|a| a == "help")
                        && args.iter().skip(1).all(|a| a == "--help" || a == "-h") =>
                {
                    use clap::CommandFactory as _;
                    let _ = Cli::command().print_help();
                    ExitCode::SUCCESS
                }
                // An unknown flag names no setting: no variable to point at.
                ErrorKind::UnknownArgument => config_error(err.render().to_string().trim_end()),
                ErrorKind::MissingRequiredArgument
                    if args.first().is_some_and(|a| a == "run")
                        && !args.iter().any(|a| a == "--")
                        && err.to_string().contains("<COMMAND>") =>
                {
                    config_error(&format!(
                        "{}\n\nhint: put `--` between the lock names and the command: lockgate run NAME -- COMMAND [ARGS...]",
                        err.render().to_string().trim_end()
                    ))
                }
                // clap's whole message: the error, its hints and the usage line.
                _ => config_error(&name_variables(err.render().to_string().trim_end())),
            };
        }
    };
    match cli.command {
        Some(Command::Openapi) => {
            let limits = lockgate::config::default_limits();
            let document = lockgate::http::openapi_document(&limits);
            return write_out(format!("{document}\n").as_bytes());
        }
        Some(Command::Completions { shell }) => {
            use clap::CommandFactory as _;
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "lockgate", &mut out);
            return write_out(&out);
        }
        Some(Command::Run(args)) => {
            return client_command("lockgate run", lockgate::cli::run::run(args));
        }
        Some(Command::RunGuard { kill_after }) => {
            return ExitCode::from(lockgate::cli::run::run_guard(&kill_after));
        }
        Some(Command::Healthcheck(args)) => {
            return client_command(
                "lockgate healthcheck",
                lockgate::cli::healthcheck::run(args),
            );
        }
        None => {}
    }
    let config = match Config::from_args(cli.serve) {
        Ok(config) => config,
        Err(err) => return config_error(&name_variables(&format!("error: {err}"))),
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(threads) = config.worker_threads {
        runtime.worker_threads(threads);
    }
    let runtime = match runtime.build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let log_format = config.log_format;
    let start_logging =
        move || lockgate::telemetry::logging::init(log_format, std::io::stderr().is_terminal());
    match runtime.block_on(lockgate::app::run(config, start_logging)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(StartupError::Config(message)) => {
            config_error(&name_variables(&format!("error: {message}")))
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a client subcommand on a single-threaded runtime; its result is the exit status.
fn client_command(name: &str, command: impl std::future::Future<Output = u8>) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => ExitCode::from(runtime.block_on(command)),
        Err(err) => {
            eprintln!("{name}: cannot start the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

fn config_error(line: &str) -> ExitCode {
    eprintln!("{line}");
    ExitCode::from(EXIT_CONFIG)
}

/// jemalloc instead of glibc's allocator or mimalloc: with 10,000 waiting clients the gateway
/// needs a fraction of the memory (it leaves untouched parts of hyper's per-connection buffers
/// unresident and returns freed memory to the OS), idles smaller, and serves lock cycles at
/// least as fast (figures in bench/README.md). Built with one arena (`.cargo/config.toml` says
/// why; `tests/it/cli.rs` checks it).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
