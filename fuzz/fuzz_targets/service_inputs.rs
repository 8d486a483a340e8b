//! What strangers hand the service side: a configuration file's text (checked against
//! a command with the flag shapes the daemons have) and a metrics request's head. Each
//! may be refused, never panic; a configuration error names a line inside the text.
//! Run: cargo +nightly fuzz run service_inputs
#![no_main]

use std::path::Path;

use clap::{value_parser, Arg, ArgAction, Command};
use libfuzzer_sys::fuzz_target;

fn nbd() -> Command {
    Command::new("nbd")
        .arg(Arg::new("volume").required(true))
        .arg(Arg::new("config").long("config"))
        .arg(Arg::new("workers").long("workers").value_parser(value_parser!(u16)))
        .arg(Arg::new("grace").long("grace").value_parser(value_parser!(f64)))
        .arg(Arg::new("read_only").long("read-only").action(ArgAction::SetTrue))
        .arg(Arg::new("metrics").long("metrics"))
}

fuzz_target!(|data: &[u8]| {
    let _ = hscm_service::http::route(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match hscm_service::config::Config::parse(Path::new("fuzz.toml"), text) {
        Ok(config) => {
            if let Err(hscm_service::config::ConfigError::At { line, .. }) =
                config.check("nbd", &nbd())
            {
                assert!(line >= 1 && line <= text.lines().count().max(1), "line {line}");
            }
        }
        Err(hscm_service::config::ConfigError::At { line, .. }) => {
            assert!(line >= 1 && line <= text.lines().count() + 1, "line {line}");
        }
        Err(e) => panic!("parsing text cannot fail to read it: {e}"),
    }
});
