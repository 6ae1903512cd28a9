"""structured_schemas.py - the JSON schemas the structured-output tests
share: PERSON (tests/structured_test.py's json_schema checks) and
FUZZ_SCHEMAS (its fuzz group and tools/schema_fuzz.py), every keyword
family of the converter at least once."""

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer"},
        "city": {"enum": ["Paris", "Berlin", "Rome"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
        "member": {"type": "boolean"},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}


FUZZ_SCHEMAS = [
    PERSON,
    {"type": "object", "properties": {}, "additionalProperties": False},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": -20, "maximum": 150},
                                      "k": {"type": "integer", "exclusiveMinimum": 0},
                                      "lat": {"type": "number", "minimum": -90, "maximum": 90}},
     "required": ["n", "k", "lat"]},
    {"type": "array", "prefixItems": [{"type": "string", "format": "date"}, {"type": "string", "format": "uuid"}],
     "items": False},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
               {"$ref": "#/$defs/b"}],
     "$defs": {"b": {"type": "object", "properties": {"b": {"type": "string", "format": "date-time"}},
                     "required": ["b"]}}},
    {"type": "object", "properties": {"xs": {"type": "array", "items": {"$ref": "#/properties/x"}, "maxItems": 4},
                                      "x": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
     "required": ["xs"]},
    {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3,5}(x|y)?$"},
                                      "q": {"type": "string", "pattern": "^\"[^\"]{0,6}\"$"}},
     "required": ["id", "q"]},
    {"type": "object", "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 8},
                                      "e": {"enum": ["a", 1, None, True]}}, "required": ["s", "e"]},
    {"type": "object", "properties": {"p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1.5},
                                      "t": {"type": "number", "minimum": -2.25, "exclusiveMaximum": -0.125},
                                      "code": {"type": "string", "pattern": "[A-Z]{2}[0-9]"}},
     "required": ["p", "t", "code"]},
    {"allOf": [{"$ref": "#/$defs/base"},
               {"anyOf": [{"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                          {"properties": {"n": {"type": "integer", "maximum": 9}}, "required": ["n"]}]}],
     "$defs": {"base": {"type": "object", "properties": {"c": {"allOf": [{"enum": ["x", "y", 3]},
                                                                         {"type": "string"}]}},
                        "required": ["c"]}}},
]
