// How error messages name input fields. The core names the proto fields (`project_id`,
// `if_match`), as the RPC faces carry them; a translation layer with names of its own (REST:
// `projectID`, `If-Match`) puts its table in the handler context, and the core uses it.

import { type ContextValues, createContextKey, type HandlerContext } from "@connectrpc/connect";
import { BadRequestError, PreconditionFailedError } from "../domain/errors.js";

/**
 * A face's names for input fields, by proto field name; a field of a nested or repeated message
 * is keyed by its path (`resources.if_match`). Fields not in the table keep their proto name.
 */
export type FieldNames = Readonly<Record<string, string>>;

export const fieldNamesKey = createContextKey<FieldNames>(
  {},
  { description: "the face's names for input fields in error messages" },
);

type Context = Pick<HandlerContext, "values"> | { values: ContextValues };

/** The name the calling face gives `field` (a proto field name or path), or `unnamed(field)`. */
function faceName(ctx: Context, field: string, unnamed: (field: string) => string): string {
  return ctx.values.get(fieldNamesKey)[field] ?? unnamed(field);
}

/** The name the calling face gives `field`; a field it does not name keeps its last segment. */
export function fieldName(ctx: Context, field: string): string {
  return faceName(ctx, field, (path) => path.slice(path.lastIndexOf(".") + 1));
}

/** The name the calling face gives `field`; a field it does not name keeps its whole path (`from.as_of`). */
export function fieldPathName(ctx: Context, field: string): string {
  return faceName(ctx, field, (path) => path);
}

/**
 * `err` worded with the calling face's name for the field its reason names, when it was made
 * below the core (domain rules, storage) with a FieldReason; any other error unchanged.
 */
export function inFaceNames(err: unknown, ctx: Context): unknown {
  if (!(err instanceof BadRequestError || err instanceof PreconditionFailedError)) return err;
  const named = err.fieldReason;
  if (!named) return err;
  const name = fieldName(ctx, named.field);
  if (name === named.field) return err;
  const reason = named.reason(name);
  return err instanceof BadRequestError ? new BadRequestError(reason) : new PreconditionFailedError(reason);
}
