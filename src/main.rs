//! The `lockgate` binary: parse the configuration, set up logging, run.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use lockgate::app::StartupError;
use lockgate::config::flags::name_variables;
use lockgate::config::{Cli, Command, Config};

/// sysexits(3) EX_USAGE: the configuration is wrong.
const EXIT_CONFIG: u8 = 64;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            return match err.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = err.print();
                    ExitCode::SUCCESS
                }
                // clap's whole message: the error, its hints and the usage line.
                _ => config_error(&name_variables(err.render().to_string().trim_end())),
            };
        }
    };
    match cli.command {
        Some(Command::Openapi) => {
            let limits = lockgate::config::default_limits();
            println!("{}", lockgate::http::openapi_document(&limits));
            return ExitCode::SUCCESS;
        }
        Some(Command::Run(args)) => {
            return client_command("lockgate run", lockgate::cli::run::run(args));
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
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
/// least as fast (figures in bench/README.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
