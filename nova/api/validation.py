"""Request validation helpers: JSON schema bodies and query parameters.

Every failure is an APIValidationError (400) naming the field and the bad
value, the way clients show it to users.
"""

import jsonschema

from nova import exception

_INT_PATTERN = r'^\s*[0-9]+\s*$'


def positive_integer() -> dict:
    """Schema: an integer >= 1, or a string of digits (clients send both)."""
    return {'anyOf': [{'type': 'integer', 'minimum': 1},
                      {'type': 'string', 'pattern': r'^\s*0*[1-9][0-9]*\s*$'}]}


def non_negative_integer() -> dict:
    """Schema: an integer >= 0, or a string of digits."""
    return {'anyOf': [{'type': 'integer', 'minimum': 0},
                      {'type': 'string', 'pattern': _INT_PATTERN}]}


def validate(body: dict, schema: dict) -> None:
    """Check ``body`` against ``schema``; APIValidationError if it fails."""
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(body))
    if error is None:
        return
    field = '/'.join(str(p) for p in error.absolute_path) or 'body'
    if error.validator == 'anyOf':
        reason = '%r is not valid' % (error.instance,)
    else:
        reason = error.message
    raise exception.APIValidationError(field=field, reason=reason)


def boolean(name: str, value: str) -> bool:
    """A query parameter spelled true/false/1/0/yes/no."""
    lowered = value.strip().lower()
    if lowered in ('true', '1', 'yes', 'on'):
        return True
    if lowered in ('false', '0', 'no', 'off'):
        return False
    raise exception.APIValidationError(
        field=name, reason='%r is not a boolean (true or false)' % value)


def query_int(req, name: str) -> int | None:
    """A non-negative integer query parameter, or None if absent."""
    value = req.GET.get(name)
    if value is None:
        return None
    if not value.strip().isdecimal():
        raise exception.APIValidationError(
            field=name, reason='%r is not a non-negative integer' % value)
    return int(value)


def paginate(req, items: list[dict], key: str) -> list[dict]:
    """Apply ``marker`` (the key of the last item seen) and ``limit``."""
    marker = req.GET.get('marker')
    if marker is not None:
        keys = [item[key] for item in items]
        if marker not in keys:
            raise exception.APIValidationError(
                field='marker', reason='marker %r matches no item' % marker)
        items = items[keys.index(marker) + 1:]
    limit = query_int(req, 'limit')
    return items if limit is None else items[:limit]
