//! Named parameters (from Python keyword arguments or a sweep spec) read through a
//! command's own flag group, so a simulator's parameters have one definition: the
//! `clap::Args` struct its command uses, with the same names (`dram_size` for
//! `--dram-size`), the same defaults, parsers and checks.

use std::error::Error as _;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, Args, Command, FromArgMatches};
use serde_json::Value;

/// A parameter that could not be read, and which one, so that a caller can point at
/// where it was written (a keyword argument, a line of a spec).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("parameter {param}: {message}")]
pub struct ParamError {
    /// The parameter's name as the caller wrote it ("" when the error concerns none).
    pub param: String,
    pub message: String,
}

impl ParamError {
    fn new(param: &str, message: impl Into<String>) -> ParamError {
        ParamError {
            param: param.to_string(),
            message: message.into(),
        }
    }
}

/// The parameter names `T` accepts, in declaration order, without `exclude`.
pub fn names<T: Args>(exclude: &[&str]) -> Vec<String> {
    let cmd = T::augment_args(Command::new("params"));
    cmd.get_arguments()
        .filter(|a| a.get_long().is_some())
        .map(|a| a.get_id().to_string())
        .filter(|id| !exclude.contains(&id.as_str()))
        .collect()
}

/// Reads `params` as `T`'s flags: a boolean switches a flag on or off, a list fills a
/// comma-separated flag, anything else is written as the flag's text. Names in
/// `exclude` (output switches such as `json`) are refused as unknown.
pub fn parse<T: Args + FromArgMatches>(
    params: &[(String, Value)],
    exclude: &[&str],
) -> Result<T, ParamError> {
    let cmd = T::augment_args(Command::new("params").no_binary_name(true));
    let mut argv: Vec<String> = Vec::new();
    for (name, value) in params {
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == name.as_str() && !exclude.contains(&name.as_str()))
            .filter(|a| a.get_long().is_some())
            .ok_or_else(|| {
                ParamError::new(
                    name,
                    format!(
                        "unknown parameter (known: {})",
                        names::<T>(exclude).join(", ")
                    ),
                )
            })?;
        let long = format!("--{}", arg.get_long().expect("filtered above"));
        if matches!(arg.get_action(), ArgAction::SetTrue) {
            match value {
                Value::Bool(true) => argv.push(long),
                Value::Bool(false) | Value::Null => {}
                other => {
                    return Err(ParamError::new(
                        name,
                        format!("expected true or false, got {}", describe(other)),
                    ))
                }
            }
            continue;
        }
        let text = match value {
            Value::Null => continue,
            Value::Array(items) => {
                if arg.get_value_delimiter().is_none() {
                    return Err(ParamError::new(name, "takes one value, not a list"));
                }
                if items.is_empty() {
                    return Err(ParamError::new(name, "an empty list"));
                }
                let parts: Result<Vec<String>, ParamError> =
                    items.iter().map(|v| scalar_text(name, v)).collect();
                parts?.join(",")
            }
            v => scalar_text(name, v)?,
        };
        argv.push(format!("{long}={text}"));
    }
    let matches = cmd
        .clone()
        .try_get_matches_from(&argv)
        .map_err(|e| clap_error(&cmd, &e))?;
    T::from_arg_matches(&matches).map_err(|e| ParamError::new("", e.to_string()))
}

/// A clap error as a [`ParamError`] naming the parameter by its id, not its flag.
fn clap_error(cmd: &Command, e: &clap::Error) -> ParamError {
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(flag)) => Some(flag.as_str()),
        Some(ContextValue::Strings(flags)) => flags.first().map(String::as_str),
        _ => None,
    };
    // The context holds "--flag <VALUE>".
    let flag = flag.and_then(|f| f.split_whitespace().next()).unwrap_or("");
    let param = cmd
        .get_arguments()
        .find(|a| a.get_long().is_some_and(|l| format!("--{l}") == flag))
        .map_or_else(String::new, |a| a.get_id().to_string());
    let value = match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(v)) => format!(" {v:?}"),
        _ => String::new(),
    };
    let detail = e.source().map(|s| format!(": {s}")).unwrap_or_default();
    let text = match e.kind() {
        ErrorKind::MissingRequiredArgument => "required, but not given".to_string(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            format!("invalid value{value}{detail}")
        }
        kind => match kind.as_str() {
            Some(what) => format!("{what}{value}{detail}"),
            None => e.to_string(),
        },
    };
    ParamError::new(&param, text)
}

fn scalar_text(name: &str, v: &Value) -> Result<String, ParamError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(ParamError::new(
            name,
            format!("expected a number or a string, got {}", describe(other)),
        )),
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmsim::CacheArgs;
    use serde_json::json;

    fn p(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn keyword_parameters_reach_the_same_flags_as_the_command_line() {
        let a: CacheArgs = parse(
            &p(&[
                ("trace", json!("t.zst")),
                ("policy", json!(["lru", "arc"])),
                ("size", json!(["1%", 100])),
                ("objects", json!(true)),
                ("ghost", json!(50)),
            ]),
            &["json", "csv"],
        )
        .unwrap();
        assert_eq!(a.policy.len(), 2);
        assert_eq!(a.size.len(), 2);
        assert!(a.objects);
        assert_eq!(a.ghost, Some(50));
        // Defaults are the flags' own.
        assert_eq!(a.block, 4096);
    }

    #[test]
    fn an_unknown_parameter_is_named_with_the_known_ones() {
        let e =
            parse::<CacheArgs>(&p(&[("trace", json!("t")), ("sizes", json!(3))]), &[]).unwrap_err();
        assert_eq!(e.param, "sizes");
        assert!(e.message.contains("known: trace, format, policy"), "{e}");
        let e = parse::<CacheArgs>(
            &p(&[("trace", json!("t")), ("json", json!(true))]),
            &["json"],
        )
        .unwrap_err();
        assert_eq!(e.param, "json");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named() {
        let e = parse::<CacheArgs>(&p(&[("trace", json!("t")), ("block", json!("big"))]), &[])
            .unwrap_err();
        assert_eq!(e.param, "block");
        assert!(e.message.contains("\"big\""), "{e}");
        let e = parse::<CacheArgs>(&p(&[("trace", json!("t")), ("objects", json!(3))]), &[])
            .unwrap_err();
        assert_eq!(
            (e.param.as_str(), e.message.as_str()),
            ("objects", "expected true or false, got a number")
        );
        let e = parse::<CacheArgs>(&p(&[("trace", json!("t")), ("block", json!([1, 2]))]), &[])
            .unwrap_err();
        assert_eq!(e.param, "block");
        let e = parse::<CacheArgs>(&p(&[("trace", json!("t")), ("policy", json!([]))]), &[])
            .unwrap_err();
        assert_eq!(
            (e.param.as_str(), e.message.as_str()),
            ("policy", "an empty list")
        );
    }

    #[test]
    fn a_missing_required_parameter_is_reported() {
        let e = parse::<CacheArgs>(&[], &[]).unwrap_err();
        assert_eq!(e.param, "trace", "{e}");
        assert!(e.message.contains("required"), "{e}");
    }
}
