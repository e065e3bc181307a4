import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { CONTEXT_FIELD_DESCRIPTIONS, CONTEXT_STRING_FIELDS, QUANTITY_DESCRIPTION, RequestContextSchema, TAGS_DESCRIPTION } from '../../src/schema/request-context.js';

/**
 * README's "The request" table lists every RequestContext field with its meaning as the schema
 * (src/schema/request-context.ts, also the OpenAPI document's) describes it: any drift fails here, with
 * the table to paste.
 */

const START = '<!-- request-fields:start';
const END = '<!-- request-fields:end -->';

/** The table as the schema gives it. */
function tableFromSchema(): string {
  const rows = [...CONTEXT_STRING_FIELDS.map((field) => [field, CONTEXT_FIELD_DESCRIPTIONS[field]]), ['quantity', QUANTITY_DESCRIPTION], ['tags', TAGS_DESCRIPTION]];
  return ['| field | meaning |', '|---|---|', ...rows.map(([field, meaning]) => `| \`${field}\` | ${meaning} |`)].join('\n');
}

function tableInReadme(): string {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  expect(start, `README.md has no ${START} marker`).to.be.greaterThan(-1);
  expect(end, `README.md has no ${END} marker`).to.be.greaterThan(start);
  return readme.slice(readme.indexOf('\n', start) + 1, end).trim();
}

describe('README: the request fields', () => {
  it('lists every RequestContext field with the schema\'s description, in the schema\'s order', () => {
    const expected = tableFromSchema();
    expect(tableInReadme(), `README.md's request table must read:\n${expected}\n`).to.equal(expected);
  });

  it('the schema describes every field it has (so the table and the OpenAPI document leave none out)', () => {
    const properties = RequestContextSchema.properties as Record<string, { description?: string }>;
    expect(Object.keys(properties)).to.deep.equal([...CONTEXT_STRING_FIELDS, 'quantity', 'tags']);
    for (const [field, schema] of Object.entries(properties)) expect(schema.description, field).to.be.a('string').and.not.equal('');
  });
});
