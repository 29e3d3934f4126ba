//! Store configuration: `**config` keywords → `StoreConfig`, and the field table.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};
use rocketstore::{ConfigValue, FieldKind, StoreConfig};

use crate::convert::py_repr;
use crate::error::{invalid_config, map_error};

/// A configuration value as a Python object: int, bool or str.
#[derive(Debug, Clone, IntoPyObject)]
pub(crate) enum PyConfigValue {
    Bool(bool),
    Int(i64),
    Str(String),
}

impl From<ConfigValue> for PyConfigValue {
    fn from(v: ConfigValue) -> Self {
        match v {
            ConfigValue::Bool(b) => PyConfigValue::Bool(b),
            ConfigValue::Int(i) => PyConfigValue::Int(i),
            ConfigValue::Str(s) => PyConfigValue::Str(s),
        }
    }
}

/// The names of every configuration field, in table order.
fn field_names() -> Vec<&'static str> {
    StoreConfig::fields().iter().map(|f| f.name).collect()
}

/// Up to three known names close to `key` (Python's `difflib.get_close_matches`).
fn close_matches(py: Python<'_>, key: &str) -> Vec<String> {
    let names = field_names();
    py.import("difflib")
        .and_then(|difflib| difflib.call_method1("get_close_matches", (key, names, 3, 0.6)))
        .and_then(|m| m.extract::<Vec<String>>())
        .unwrap_or_default()
}

fn value_of(py: Python<'_>, key: &str, v: &Bound<'_, PyAny>) -> PyResult<ConfigValue> {
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(ConfigValue::Bool(b.is_true()));
    }
    if v.is_instance_of::<PyInt>() {
        return match v.extract::<i64>() {
            Ok(i) => Ok(ConfigValue::Int(i)),
            Err(_) => Err(invalid_config(
                py,
                key,
                format!("invalid configuration {key}: {v} is outside the 64-bit integer range"),
                Vec::new(),
            )),
        };
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(ConfigValue::Str(s.to_cow()?.into_owned()));
    }
    let type_name = v
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string());
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "configuration {key} must be an int, bool or str, not {type_name}"
    )))
}

/// Builds a `StoreConfig` from keyword arguments; every value is checked by the engine.
pub(crate) fn config_from_kwargs(
    py: Python<'_>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<StoreConfig> {
    let mut config = StoreConfig::default();
    let Some(kwargs) = kwargs else {
        return Ok(config);
    };
    let names = field_names();
    for (k, v) in kwargs.iter() {
        let key: String = k.extract()?;
        if !names.contains(&key.as_str()) {
            let suggestions = close_matches(py, &key);
            let hint = if suggestions.is_empty() {
                "see rocketstore.config_fields() for the list".to_string()
            } else {
                format!(
                    "did you mean {}?",
                    suggestions
                        .iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                )
            };
            return Err(invalid_config(
                py,
                &key,
                format!("invalid configuration {key}: unknown configuration key; {hint}"),
                suggestions,
            ));
        }
        let value = value_of(py, &key, &v)?;
        config.set(&key, value).map_err(|e| map_error(py, &e))?;
    }
    config.validate().map_err(|e| map_error(py, &e))?;
    Ok(config)
}

/// The effective values of every field.
pub(crate) fn config_values<'py>(
    py: Python<'py>,
    config: &StoreConfig,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for f in StoreConfig::fields() {
        if let Some(v) = config.get(f.name) {
            d.set_item(f.name, PyConfigValue::from(v))?;
        }
    }
    Ok(d)
}

/// One configuration field: its name, RocketMQ name, kind, range, default and documentation.
///
/// Example:
///
/// ```python
/// for f in rocketstore.config_fields():
///     print(f.name, f.kind, f.default, f.min, f.max)
/// ```
#[pyclass(module = "rocketstore._native", frozen, get_all)]
#[derive(Debug)]
pub(crate) struct ConfigField {
    /// The keyword name (snake_case), as passed to MessageStore(path, **config).
    name: &'static str,
    /// The RocketMQ MessageStoreConfig name it mirrors, or None for rocketstore's own fields.
    rocketmq_name: Option<&'static str>,
    /// "int", "bool" or "str".
    kind: &'static str,
    /// Smallest accepted value of an int field (None for other kinds).
    min: Option<i64>,
    /// Largest accepted value of an int field (None for other kinds).
    max: Option<i64>,
    /// The default value.
    default: PyConfigValue,
    /// What the field does.
    doc: String,
}

#[pymethods]
impl ConfigField {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let default = self.default.clone().into_pyobject(py)?.repr()?;
        Ok(format!(
            "ConfigField(name={}, kind={}, default={default})",
            py_repr(py, self.name)?,
            py_repr(py, self.kind)?
        ))
    }
}

/// Every configuration field MessageStore(path, **config) accepts, with its kind, range,
/// default and documentation.
///
/// Example:
///
/// ```python
/// >>> [f.name for f in rocketstore.config_fields()][:2]
/// ['mapped_file_size_commit_log', 'mapped_file_size_consume_queue']
/// ```
#[pyfunction]
pub(crate) fn config_fields() -> Vec<ConfigField> {
    let defaults = StoreConfig::default();
    StoreConfig::fields()
        .into_iter()
        .map(|f| {
            let (kind, min, max) = match f.kind {
                FieldKind::Int { min, max } => ("int", Some(min), Some(max)),
                FieldKind::Bool => ("bool", None, None),
                FieldKind::Str => ("str", None, None),
            };
            let default = defaults
                .get(f.name)
                .map_or(PyConfigValue::Str(f.default.clone()), PyConfigValue::from);
            ConfigField {
                name: f.name,
                rocketmq_name: f.rocketmq_name,
                kind,
                min,
                max,
                default,
                doc: f.doc.trim().to_string(),
            }
        })
        .collect()
}
