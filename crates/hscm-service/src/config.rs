//! The configuration file of the long-running commands (`--config FILE`): TOML, one
//! section per command, whose keys are the command's own long flags and arguments
//! (`dirty-max = "1G"`, `volume = "/var/lib/hscm/log.hscm"`; `dirty_max` works too).
//!
//! Every key is checked against the command's flags and every value by the flag's
//! own parser, so the file takes exactly what the command line takes and an error
//! names the file, the line and the key. Flags given on the command line win over
//! the file.
//!
//! ```toml
//! [mount]
//! volume = "/var/lib/hscm/log.hscm"
//! mountpoint = "/var/log"
//! durability = "immediate"
//! metrics = "127.0.0.1:9477"
//! ```

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Command};
use toml::Spanned;

/// The commands a file configures, each by its section.
pub const SECTIONS: &[&str] = &["mount", "nbd", "serve"];

/// A configuration file that cannot be used, and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("{file}: {source}")]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: {message}")]
    At {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// One key of a section, where it was written.
#[derive(Debug, Clone)]
struct Entry {
    key: String,
    value: toml::Value,
    line: usize,
    column: usize,
}

/// A parsed file: its sections, keys in file order.
#[derive(Debug)]
pub struct Config {
    file: PathBuf,
    sections: BTreeMap<String, Vec<Entry>>,
}

type Raw = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// (line, column), both from 1, of byte `at` in `text`.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl Config {
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Read {
            file: file.to_path_buf(),
            source,
        })?;
        Config::parse(file, &text)
    }

    /// `text`, read from `file` (named in errors).
    pub fn parse(file: &Path, text: &str) -> Result<Config, ConfigError> {
        let at = |span_start: usize, message: String| {
            let (line, column) = position(text, span_start);
            ConfigError::At {
                file: file.to_path_buf(),
                line,
                column,
                message,
            }
        };
        let raw: Raw = toml::from_str(text).map_err(|e| {
            let start = e.span().map_or(0, |s| s.start);
            at(start, format!("not valid TOML: {}", e.message()))
        })?;
        let mut sections = BTreeMap::new();
        for (name, table) in raw {
            let section = name.get_ref();
            let toml::Value::Table(_) = table.get_ref() else {
                return Err(at(
                    name.span().start,
                    format!(
                        "`{section}` is outside a section: keys go under [{}]",
                        SECTIONS.join("], [")
                    ),
                ));
            };
            if !SECTIONS.contains(&section.as_str()) {
                return Err(at(
                    name.span().start,
                    format!(
                        "unknown section [{section}]: hscm reads [{}]",
                        SECTIONS.join("], [")
                    ),
                ));
            }
            sections.insert(section.clone(), Vec::new());
        }
        // The keys again, with their own spans (a table's span does not give them).
        let spanned: BTreeMap<Spanned<String>, Raw> = toml::from_str(text).map_err(|e| {
            at(
                e.span().map_or(0, |s| s.start),
                format!("not valid TOML: {}", e.message()),
            )
        })?;
        for (name, keys) in spanned {
            let entries = sections.entry(name.get_ref().clone()).or_default();
            for (key, value) in keys {
                let (line, column) = position(text, key.span().start);
                entries.push(Entry {
                    key: key.get_ref().clone(),
                    value: value.into_inner(),
                    line,
                    column,
                });
            }
            entries.sort_by_key(|e| (e.line, e.column));
        }
        Ok(Config {
            file: file.to_path_buf(),
            sections,
        })
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The sections the file has.
    pub fn sections(&self) -> impl Iterator<Item = &str> {
        self.sections.keys().map(String::as_str)
    }

    fn error(&self, e: &Entry, message: String) -> ConfigError {
        ConfigError::At {
            file: self.file.clone(),
            line: e.line,
            column: e.column,
            message,
        }
    }

    /// Checks `section` against `command` (the subcommand it configures): every key
    /// one of its flags or arguments, every value one its parser takes.
    pub fn check(&self, section: &str, command: &Command) -> Result<(), ConfigError> {
        self.args(section, command).map(|_| ())
    }

    /// Reads `file` and checks every section that names a subcommand of `root` (`hscm
    /// config check`); returns the sections it has.
    pub fn check_file(file: &Path, root: &Command) -> Result<Vec<String>, ConfigError> {
        let config = Config::load(file)?;
        for section in config.sections() {
            if let Some(command) = root.find_subcommand(section) {
                config.check(section, command)?;
            }
        }
        Ok(config.sections().map(str::to_string).collect())
    }

    /// The section's keys as arguments of `command`: (options as `--flag value`,
    /// positional values in order).
    fn args(
        &self,
        section: &str,
        command: &Command,
    ) -> Result<Vec<(String, ConfigArg)>, ConfigError> {
        let Some(entries) = self.sections.get(section) else {
            return Ok(Vec::new());
        };
        let known: Vec<&Arg> = command
            .get_arguments()
            .filter(|a| !matches!(a.get_action(), ArgAction::Help | ArgAction::Version))
            .filter(|a| a.get_id() != "config")
            .collect();
        let mut out = Vec::new();
        for e in entries {
            let wanted = e.key.replace('_', "-");
            let Some(arg) = known.iter().find(|a| {
                a.get_long() == Some(wanted.as_str())
                    || (a.is_positional() && a.get_id().as_str().replace('_', "-") == wanted)
            }) else {
                let names: Vec<String> = known
                    .iter()
                    .map(|a| {
                        a.get_long()
                            .map_or_else(|| a.get_id().to_string(), str::to_string)
                    })
                    .collect();
                return Err(self.error(
                    e,
                    format!(
                        "unknown key `{}` in [{section}]; `hscm {section}` takes: {}",
                        e.key,
                        names.join(", ")
                    ),
                ));
            };
            let switch = matches!(arg.get_action(), ArgAction::SetTrue);
            let text = match (&e.value, switch) {
                (toml::Value::Boolean(b), true) => {
                    if *b {
                        out.push((arg.get_id().to_string(), ConfigArg::Switch(wanted.clone())));
                    }
                    continue;
                }
                (_, true) => {
                    return Err(self.error(e, format!("`{}` is a switch: true or false", e.key)))
                }
                (toml::Value::String(s), false) => s.clone(),
                (toml::Value::Integer(i), false) => i.to_string(),
                (toml::Value::Float(f), false) => f.to_string(),
                (other, false) => {
                    return Err(self.error(
                        e,
                        format!(
                            "`{}` takes one value (a string or a number), not {}",
                            e.key,
                            other.type_str()
                        ),
                    ))
                }
            };
            if !arg.is_positional() {
                // The flag's own parser, through the command (its parsers are not
                // callable alone): the value alone, nothing else required.
                let alone = command
                    .clone()
                    .no_binary_name(true)
                    .mut_args(|a| a.required(false))
                    .try_get_matches_from([format!("--{wanted}"), text.clone()]);
                if let Err(err) = alone {
                    let why = err.to_string();
                    let why = why
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .trim_start_matches("error: ");
                    return Err(self.error(e, format!("`{}`: {why}", e.key)));
                }
            }
            let value = if arg.is_positional() {
                ConfigArg::Positional(text)
            } else {
                ConfigArg::Option(wanted.clone(), text)
            };
            out.push((arg.get_id().to_string(), value));
        }
        Ok(out)
    }
}

/// One argument a section supplies.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ConfigArg {
    Option(String, String),
    Switch(String),
    Positional(String),
}

/// `argv` (the program's, `argv[1]` the subcommand) with the file named by its
/// `--config FILE` merged in: the file's section for that subcommand supplies every
/// flag the command line does not give, and the positional arguments when the
/// command line gives none. `root` is the program's whole command. An `argv`
/// without `--config` comes back unchanged.
pub fn merge(argv: Vec<OsString>, root: &Command) -> Result<Vec<OsString>, ConfigError> {
    let Some(sub) = argv.get(1).and_then(|s| s.to_str()).map(str::to_string) else {
        return Ok(argv);
    };
    if !SECTIONS.contains(&sub.as_str()) {
        return Ok(argv);
    }
    let Some(file) = config_flag(&argv[2..]) else {
        return Ok(argv);
    };
    let config = Config::load(&file)?;
    let Some(command) = root.find_subcommand(&sub) else {
        return Ok(argv);
    };
    let supplied = config.args(&sub, command)?;
    // What the command line gives, with its positionals optional, so that they can
    // come from the file; a command line that does not parse is left for the real
    // parse to report.
    let relaxed = command.clone().no_binary_name(true).mut_args(|a| {
        if a.is_positional() {
            a.required(false)
        } else {
            a
        }
    });
    let Ok(given) = relaxed.try_get_matches_from(&argv[2..]) else {
        return Ok(argv);
    };
    let on_command_line = |id: &str| given.value_source(id) == Some(ValueSource::CommandLine);
    let positional_given = command
        .get_positionals()
        .any(|a| on_command_line(a.get_id().as_str()));
    let mut merged: Vec<OsString> = argv[..2].to_vec();
    let mut positionals = Vec::new();
    for (id, arg) in supplied {
        match arg {
            ConfigArg::Option(flag, value) if !on_command_line(&id) => {
                merged.push(format!("--{flag}").into());
                merged.push(value.into());
            }
            ConfigArg::Switch(flag) if !on_command_line(&id) => {
                merged.push(format!("--{flag}").into())
            }
            ConfigArg::Positional(value) if !positional_given => positionals.push(value),
            _ => {}
        }
    }
    merged.extend(argv[2..].iter().cloned());
    if !positionals.is_empty() {
        merged.push("--".into());
        merged.extend(positionals.into_iter().map(OsString::from));
    }
    Ok(merged)
}

/// The FILE of `--config FILE` or `--config=FILE`, before any `--`.
fn config_flag(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.to_str()?;
        if a == "--" {
            return None;
        }
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(f) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(f));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{value_parser, Arg};

    fn nbd() -> Command {
        Command::new("hscm").subcommand(
            Command::new("nbd")
                .arg(Arg::new("volume").required(true))
                .arg(Arg::new("config").long("config"))
                .arg(
                    Arg::new("workers")
                        .long("workers")
                        .value_parser(value_parser!(u16)),
                )
                .arg(Arg::new("export").long("export"))
                .arg(
                    Arg::new("read_only")
                        .long("read-only")
                        .action(ArgAction::SetTrue),
                ),
        )
    }

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hscm.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn argv(items: &[&str]) -> Vec<OsString> {
        items.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_file_fills_in_what_the_command_line_leaves_out() {
        let (_d, f) =
            write("[nbd]\nvolume = \"/v\"\nworkers = 4\nexport = \"a\"\nread_only = true\n");
        let f = f.to_str().unwrap();
        let merged = merge(
            argv(&["hscm", "nbd", "--config", f, "--export", "b"]),
            &nbd(),
        )
        .unwrap();
        let m = nbd().try_get_matches_from(&merged).unwrap();
        let (_, m) = m.subcommand().unwrap();
        assert_eq!(m.get_one::<String>("volume").unwrap(), "/v");
        assert_eq!(*m.get_one::<u16>("workers").unwrap(), 4);
        assert_eq!(
            m.get_one::<String>("export").unwrap(),
            "b",
            "the command line wins"
        );
        assert!(m.get_flag("read_only"));
        // A positional on the command line replaces the file's.
        let merged = merge(argv(&["hscm", "nbd", "/w", "--config", f]), &nbd()).unwrap();
        let m = nbd().try_get_matches_from(&merged).unwrap();
        assert_eq!(
            m.subcommand()
                .unwrap()
                .1
                .get_one::<String>("volume")
                .unwrap(),
            "/w"
        );
    }

    #[test]
    fn an_unknown_key_a_bad_value_and_bad_toml_name_the_file_and_line() {
        let cases = [
            (
                "[nbd]\nvolume = \"/v\"\n\nworkerz = 4\n",
                4,
                "unknown key `workerz` in [nbd]",
            ),
            ("[nbd]\nworkers = \"many\"\n", 2, "`workers`: invalid value"),
            ("[nbd]\nread-only = \"yes\"\n", 2, "is a switch"),
            ("[nbd]\nexport = [1, 2]\n", 2, "takes one value"),
            ("[nbdd]\nworkers = 1\n", 1, "unknown section [nbdd]"),
            ("workers = 1\n", 1, "outside a section"),
            ("[nbd]\nworkers = \n", 2, "not valid TOML"),
        ];
        for (text, line, what) in cases {
            let (_d, f) = write(text);
            let err = merge(
                argv(&["hscm", "nbd", "--config", f.to_str().unwrap()]),
                &nbd(),
            )
            .unwrap_err()
            .to_string();
            let at = format!("{}:{line}:", f.display());
            assert!(err.starts_with(&at), "{text:?}: {err}");
            assert!(err.contains(what), "{text:?}: {err}");
        }
    }

    #[test]
    fn without_config_the_arguments_are_untouched() {
        let a = argv(&["hscm", "nbd", "/v", "--workers", "2"]);
        assert_eq!(merge(a.clone(), &nbd()).unwrap(), a);
    }
}
