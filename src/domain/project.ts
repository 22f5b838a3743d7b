// Projects and environments of content insights: what a valid name is. A project is
// `project://{account}/{name}` and by default lives in a store of its name; an environment
// is a top-level directory of that store.

import { BadRequestError } from "./errors.js";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const RULE = "use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit";

function validate(what: string, name: string): string {
  if (!NAME.test(name)) throw new BadRequestError(`invalid ${what} ${JSON.stringify(name)}: ${RULE}`);
  return name;
}

export function validateProjectName(name: string): string {
  return validate("project name", name);
}

export function validateAccountName(name: string): string {
  return validate("account", name);
}

export function validateEnvironmentName(name: string): string {
  return validate("environment name", name);
}

/** The project resource the permission checks name (content-insights-service.md, Authentication). */
export function projectUri(account: string, name: string): string {
  return `project://${account}/${name}`;
}
