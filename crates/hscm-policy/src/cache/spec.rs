//! Building a cache policy from its name: the one factory the simulators and the CLI
//! use, with serde names for scripts and experiment parameters.

use serde::{Deserialize, Serialize};

use super::{
    Admitted, ArcCache, CachePolicy, ClockCache, FifoCache, LruCache, S3FifoCache, SecondMiss,
    SeenBefore, SieveCache,
};

/// An eviction policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvictionName {
    Lru,
    Fifo,
    Clock,
    Sieve,
    S3fifo,
    Arc,
}

/// An admission filter (see `admission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdmissionName {
    SecondMiss,
    SeenBefore,
}

impl EvictionName {
    pub const ALL: [EvictionName; 6] = [
        Self::Lru,
        Self::Fifo,
        Self::Clock,
        Self::Sieve,
        Self::S3fifo,
        Self::Arc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Lru => "lru",
            Self::Fifo => "fifo",
            Self::Clock => "clock",
            Self::Sieve => "sieve",
            Self::S3fifo => "s3fifo",
            Self::Arc => "arc",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

impl AdmissionName {
    pub const ALL: [AdmissionName; 2] = [Self::SecondMiss, Self::SeenBefore];

    pub fn name(self) -> &'static str {
        match self {
            Self::SecondMiss => "second-miss",
            Self::SeenBefore => "seen-before",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// A cache policy: an eviction policy, behind an admission filter or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicySpec {
    pub eviction: EvictionName,
    pub admission: Option<AdmissionName>,
    /// Keys the second-miss filter remembers (None: all).
    pub history: Option<usize>,
}

impl PolicySpec {
    pub fn eviction(eviction: EvictionName) -> PolicySpec {
        PolicySpec {
            eviction,
            admission: None,
            history: None,
        }
    }

    /// AC-LRU: LRU behind the second-miss filter (Park & Bahn's AC-cache).
    pub fn ac_lru(history: Option<usize>) -> PolicySpec {
        PolicySpec {
            eviction: EvictionName::Lru,
            admission: Some(AdmissionName::SecondMiss),
            history,
        }
    }

    /// `lru`, `ac-lru` (= `lru+second-miss`), or any `EVICTION+ADMISSION`.
    pub fn parse(name: &str) -> Option<PolicySpec> {
        if name == "ac-lru" {
            return Some(Self::ac_lru(None));
        }
        let (eviction, admission) = match name.split_once('+') {
            Some((e, a)) => (e, Some(AdmissionName::from_name(a)?)),
            None => (name, None),
        };
        Some(PolicySpec {
            eviction: EvictionName::from_name(eviction)?,
            admission,
            history: None,
        })
    }

    /// The name [`PolicySpec::parse`] reads back (`ac-lru` for LRU + second miss).
    pub fn name(&self) -> String {
        match self.admission {
            None => self.eviction.name().to_string(),
            Some(AdmissionName::SecondMiss) if self.eviction == EvictionName::Lru => {
                "ac-lru".to_string()
            }
            Some(a) => format!("{}+{}", self.eviction.name(), a.name()),
        }
    }

    /// The policy, holding `capacity` (bytes, or objects when every size is 1).
    pub fn build(&self, capacity: u64) -> Box<dyn CachePolicy> {
        let eviction: Box<dyn CachePolicy> = match self.eviction {
            EvictionName::Lru => Box::new(LruCache::new(capacity)),
            EvictionName::Fifo => Box::new(FifoCache::new(capacity)),
            EvictionName::Clock => Box::new(ClockCache::new(capacity)),
            EvictionName::Sieve => Box::new(SieveCache::new(capacity)),
            EvictionName::S3fifo => Box::new(S3FifoCache::new(capacity)),
            EvictionName::Arc => Box::new(ArcCache::new(capacity)),
        };
        match self.admission {
            None => eviction,
            // LRU + second miss keeps its concrete type (AC-LRU), one virtual call less.
            Some(AdmissionName::SecondMiss) if self.eviction == EvictionName::Lru => Box::new(
                Admitted::over(LruCache::new(capacity), SecondMiss::new(self.history)),
            ),
            Some(AdmissionName::SecondMiss) => {
                Box::new(Admitted::over(eviction, SecondMiss::new(self.history)))
            }
            Some(AdmissionName::SeenBefore) => {
                Box::new(Admitted::over(eviction, SeenBefore::new()))
            }
        }
    }
}

/// A name no cache policy has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl std::fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is no cache policy (lru, fifo, clock, sieve, s3fifo, arc, lru+second-miss, ...)",
            self.0
        )
    }
}

impl std::error::Error for UnknownPolicy {}

/// As [`PolicySpec::parse`], with an error that names what was given.
impl std::str::FromStr for PolicySpec {
    type Err = UnknownPolicy;
    fn from_str(name: &str) -> Result<PolicySpec, UnknownPolicy> {
        PolicySpec::parse(name).ok_or_else(|| UnknownPolicy(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_parses_from_its_name_and_an_unknown_one_is_named() {
        let p: PolicySpec = "lru+second-miss".parse().unwrap();
        assert_eq!(p, PolicySpec::ac_lru(None));
        let e = "lfu-ish".parse::<PolicySpec>().unwrap_err();
        assert!(
            e.to_string().starts_with("\"lfu-ish\" is no cache policy"),
            "{e}"
        );
    }

    #[test]
    fn names_round_trip() {
        for e in EvictionName::ALL {
            for a in [
                None,
                Some(AdmissionName::SecondMiss),
                Some(AdmissionName::SeenBefore),
            ] {
                let spec = PolicySpec {
                    eviction: e,
                    admission: a,
                    history: None,
                };
                assert_eq!(
                    PolicySpec::parse(&spec.name()),
                    Some(spec),
                    "{}",
                    spec.name()
                );
            }
        }
        assert_eq!(PolicySpec::parse("ac-lru"), Some(PolicySpec::ac_lru(None)));
        assert_eq!(
            PolicySpec::parse("lru+second-miss").unwrap().name(),
            "ac-lru"
        );
        assert_eq!(PolicySpec::parse("lfu"), None);
        assert_eq!(PolicySpec::parse("lru+maybe"), None);
        let json = serde_json::to_string(&PolicySpec::ac_lru(Some(5))).unwrap();
        assert_eq!(
            json,
            r#"{"eviction":"lru","admission":"second-miss","history":5}"#
        );
    }
}
