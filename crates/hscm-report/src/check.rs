//! Targets as data, and checks of measurements against them.
//!
//! A [`Target`] is a claim the report holds a measurement to: a bound, a unit, and its
//! [`Source`]: the paper and the table, figure or section it comes from, with what the
//! paper reports there, or [`Paper::ThisProject`] for a goal the project set itself (a
//! speed, a memory bound, agreement with a reference simulator). Every target lives in
//! [`super::targets`]; a section measures, then pairs each measurement with its target
//! in a [`Check`]. The renderers print a check's source beside its verdict, so a reader
//! sees where every number comes from without opening the code.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{json, Value};

/// The papers hscm is built from (shared/seeds/INDEX.md), and the project itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Paper {
    /// HSCM: hybrid DRAM + PCM main memory with WARM migration (Sun et al. 2020).
    Hscm,
    /// Baek & Park 2020, a durable hybrid RAM disk with a rapid resilience.
    Dhrd,
    /// Sprint-AEP: energy-efficient scheduling across Optane DIMMs.
    SprintAep,
    /// Seo et al., a storage protocol over the DRAM interface (2016).
    DramProtocol,
    /// Park & Bahn, file caching and paging when storage is SCM (2020).
    ScmCaching,
    /// A goal this project set itself; no paper reports it.
    ThisProject,
}

impl Paper {
    /// The seed's number in shared/seeds/INDEX.md; none for the project's own goals.
    pub fn seed(self) -> Option<&'static str> {
        match self {
            Paper::Hscm => Some("000"),
            Paper::Dhrd => Some("001"),
            Paper::SprintAep => Some("002"),
            Paper::DramProtocol => Some("003"),
            Paper::ScmCaching => Some("004"),
            Paper::ThisProject => None,
        }
    }

    /// How the report names it.
    pub fn short_name(self) -> &'static str {
        match self {
            Paper::Hscm => "HSCM/WARM",
            Paper::Dhrd => "Baek & Park 2020 (DHRD)",
            Paper::SprintAep => "Sprint-AEP",
            Paper::DramProtocol => "Seo et al. (storage over DRAM)",
            Paper::ScmCaching => "Park & Bahn (caching under SCM)",
            Paper::ThisProject => "this project",
        }
    }
}

/// Where a target comes from.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Source {
    pub paper: Paper,
    /// The table, figure or section ("Fig. 6a", "§3.3"); empty for the project's goals.
    pub at: &'static str,
    /// What the paper reports there, or why the project set this goal.
    pub says: &'static str,
}

impl Source {
    /// "Baek & Park 2020 (DHRD), Fig. 6a" or "this project".
    pub fn cite(&self) -> String {
        if self.at.is_empty() {
            self.paper.short_name().to_string()
        } else {
            format!("{}, {}", self.paper.short_name(), self.at)
        }
    }
}

/// Which side of the bound a measurement must fall on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Bound {
    AtLeast(f64),
    AtMost(f64),
}

/// A claim a measurement is held to.
#[derive(Debug, Serialize)]
pub struct Target {
    /// What is measured, as the targets table prints it.
    pub what: &'static str,
    pub bound: Bound,
    /// Appended to numbers: "x", " %", " ms".
    pub unit: &'static str,
    pub source: Source,
}

impl Target {
    fn limit(&self) -> f64 {
        match self.bound {
            Bound::AtLeast(v) | Bound::AtMost(v) => v,
        }
    }

    fn comparison(&self) -> &'static str {
        match self.bound {
            Bound::AtLeast(_) => ">=",
            Bound::AtMost(_) => "<=",
        }
    }

    /// The target as JSON, for `hscm reproduce --list-targets`.
    pub fn to_json(&self) -> Value {
        json!({"what": self.what, "comparison": self.comparison(), "target": self.limit(),
               "unit": self.unit, "source": self.source_json()})
    }

    fn source_json(&self) -> Value {
        let s = &self.source;
        json!({"paper": s.paper, "seed": s.paper.seed(), "at": s.at, "says": s.says})
    }
}

/// One measurement checked against its target.
#[derive(Debug)]
pub struct Check {
    what: String,
    ours: f64,
    target: &'static Target,
}

impl Check {
    pub fn new(target: &'static Target, ours: f64) -> Check {
        Check {
            what: target.what.to_string(),
            ours,
            target,
        }
    }

    /// Names the check after the run's own figures (a size, a count) rather than the
    /// target's fixed wording.
    pub fn named(mut self, what: impl Into<String>) -> Check {
        self.what = what.into();
        self
    }

    pub fn passed(&self) -> bool {
        match self.target.bound {
            Bound::AtLeast(v) => self.ours >= v,
            Bound::AtMost(v) => self.ours <= v,
        }
    }

    /// A row of a targets table: | experiment | check | target | ours | verdict | source |.
    pub fn table_row(&self, experiment: &str) -> String {
        let t = self.target;
        format!(
            "| {experiment} | {} | {} {:.2}{} | {:.3}{} | {} | {} |",
            self.what,
            t.comparison(),
            t.limit(),
            t.unit,
            self.ours,
            t.unit,
            if self.passed() { "met" } else { "**not met**" },
            source_cell(&t.source)
        )
    }

    /// The check as JSON; the field names are a contract of `report.json`.
    pub fn to_json(&self) -> Value {
        let t = self.target;
        json!({"what": self.what, "ours": self.ours, "target": t.limit(),
               "comparison": t.comparison(), "unit": t.unit, "passed": self.passed(),
               "source": t.source_json()})
    }
}

fn source_cell(s: &Source) -> String {
    if s.paper == Paper::ThisProject {
        format!("this project: {}", s.says)
    } else {
        format!("{}: {}", s.cite(), s.says)
    }
}

/// The header of a targets table whose first column is `first`.
pub fn table_header(md: &mut String, first: &str) {
    let _ = writeln!(md, "| {first} | check | target | ours | verdict | source |");
    let _ = writeln!(md, "|---|---|---:|---:|---|---|");
}

/// The "Targets" table of a section whose checks are named by trace (or topic): writes
/// it and returns how many passed.
pub fn targets_table(md: &mut String, title: &str, checks: &[(String, Check)]) -> usize {
    let _ = writeln!(md, "### {title}\n");
    table_header(md, "trace");
    let mut passed = 0;
    for (name, c) in checks {
        passed += usize::from(c.passed());
        let _ = writeln!(md, "{}", c.table_row(name));
    }
    passed
}

/// Those checks as JSON, each with its trace name.
pub fn named_checks_json(checks: &[(String, Check)]) -> Vec<Value> {
    checks
        .iter()
        .map(|(n, c)| {
            let mut j = c.to_json();
            j["trace"] = json!(n);
            j
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    static AT_LEAST_TWO: Target = Target {
        what: "speed-up",
        bound: Bound::AtLeast(2.0),
        unit: "x",
        source: Source {
            paper: Paper::Dhrd,
            at: "Fig. 6a",
            says: "64x",
        },
    };

    #[test]
    fn a_check_passes_on_its_side_of_the_bound_only() {
        assert!(Check::new(&AT_LEAST_TWO, 2.0).passed());
        assert!(!Check::new(&AT_LEAST_TWO, 1.99).passed());
        assert!(!Check::new(&AT_LEAST_TWO, f64::NAN).passed());
    }

    #[test]
    fn a_row_and_its_json_name_the_source() {
        let c = Check::new(&AT_LEAST_TWO, 3.0).named("speed-up, 4 KiB");
        let row = c.table_row("randread");
        assert!(
            row.contains("Baek & Park 2020 (DHRD), Fig. 6a: 64x"),
            "{row}"
        );
        assert!(row.contains("speed-up, 4 KiB"), "{row}");
        let j = c.to_json();
        for field in ["what", "ours", "target", "comparison", "unit", "passed"] {
            assert!(j.get(field).is_some(), "{field} missing from {j}");
        }
        assert_eq!(j["source"]["seed"], "001");
        assert_eq!(j["source"]["at"], "Fig. 6a");
    }
}
