{#- Manage Submissions in the course's Formgrader: nbgrader's page with a Flags column
    (static/submissions.js fills it), nbgrader's three buttons of a row in one column, the
    chapter's class reports, its grading with a progress display (static/autograde_all.js), its
    extensions (static/extensions.js) and the course's commands (autograder/nbgrader_hooks/formgrader). -#}
{%- extends 'nbgrader/manage_submissions.tpl' -%}

{%- block head -%}
{{ super() }}
<script src="{{ base_url }}/formgrader/course/submissions.js"></script>
<script src="{{ base_url }}/formgrader/course/autograde_all.js"></script>
<script src="{{ base_url }}/formgrader/course/extensions.js"></script>
<link rel="stylesheet" href="{{ base_url }}/formgrader/course/flags.css" />
{%- endblock head -%}

{%- block messages -%}
<div class="panel panel-default">
  <div class="panel-body">
    <p>
      Grade or regrade one learner with the <span class="glyphicon glyphicon-flash"></span>
      button of their row, or the whole chapter with <b>Autograde the chapter</b> below (one
      learner after the other; on several cores, from a
      <a target="_blank" href="{{ base_url }}/terminals/1">terminal</a>:
      <code>python -m autograder autograde {{ assignment_id }} --jobs 2</code>).
      Either way grading runs each notebook in the sandbox, checks every graded function
      outside it and flags what a human should look at: read a submission's
      <b>Flags</b> before you trust its score.
    </p>
    <p id="course-similarity">
      Copy detection compares every graded cell with the course's code and the class's:
      {% if reports.similarity -%}
      <a class="report" target="_blank" href="{{ base_url }}/formgrader/course/similarity/{{ assignment_id }}.html">the
      class report</a> shows each cell's closest pairs side by side, flagged or not, and each
      row links to its learner's pairs in it (written after autograding;
      {%- else -%}
      <span class="text-muted">no report yet</span>: autograding writes it (or
      {%- endif %}
      <code>python -m autograder similarity {{ assignment_id }}</code> writes it again).
      Flags of copy detection never change a score.
    </p>
    <p id="course-analysis">
      Item analysis, what the class got wrong in each exercise:
      {% if reports.analysis -%}
      <a class="report" target="_blank" href="{{ base_url }}/formgrader/course/analysis/{{ assignment_id }}.html">the
      chapter's analysis</a> (<code>python -m autograder analysis {{ assignment_id }}</code>
      writes it again).
      {%- else -%}
      <span class="text-muted">no analysis yet: run
      <code>python -m autograder analysis {{ assignment_id }}</code></span>.
      {%- endif %}
    </p>
  </div>
</div>
<div class="panel panel-default" id="course-autograde">
  <div class="panel-body">
    <button class="btn btn-primary btn-sm" type="button">Autograde the chapter</button>
    <span class="summary">grades (or regrades) every submission below, one after the other</span>
    <div class="progress hidden">
      <div class="progress-bar" role="progressbar" aria-valuemin="0"></div>
    </div>
    <ul class="outcomes"></ul>
  </div>
</div>
<div class="panel panel-default" id="course-extensions">
  <div class="panel-body">
    <p>
      Due: <span class="due">...</span>. Answers join each learner's view once their own
      deadline has passed; work handed in later is flagged <code>late</code>. Extensions:
    </p>
    <ul></ul>
    <form class="form-inline">
      <input class="form-control student" type="text" placeholder="learner id" />
      <input class="form-control until" type="datetime-local" />
      <button class="btn btn-default btn-sm" type="submit">Give extension</button>
      <span class="result"></span>
    </form>
  </div>
</div>
{%- endblock -%}

{%- block table_header -%}
<tr>
  <th>Student Name</th>
  <th class="text-center">Student ID</th>
  <th class="text-center">Timestamp</th>
  <th class="text-center">Status</th>
  <th class="text-center">Score</th>
  <th class="text-center no-sort">Actions</th>
  <th>Flags</th>
</tr>
{%- endblock -%}

{%- block table_body -%}
<tr>
  <td>Loading, please wait...</td>
  <td></td>
  <td></td>
  <td></td>
  <td></td>
  <td></td>
  <td></td>
</tr>
{%- endblock -%}
