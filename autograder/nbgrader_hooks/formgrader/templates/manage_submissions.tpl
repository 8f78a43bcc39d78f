{#- Manage Submissions in the course's Formgrader: nbgrader's page with a Flags column
    (static/submissions.js fills it) and the course's commands (autograder/nbgrader_hooks/formgrader). -#}
{%- extends 'nbgrader/manage_submissions.tpl' -%}

{%- block head -%}
{{ super() }}
<script src="{{ base_url }}/formgrader/course/submissions.js"></script>
<script src="{{ base_url }}/formgrader/course/extensions.js"></script>
<link rel="stylesheet" href="{{ base_url }}/formgrader/course/flags.css" />
{%- endblock head -%}

{%- block messages -%}
<div class="panel panel-default">
  <div class="panel-body">
    <p>
      Autograde a learner with their <span class="glyphicon glyphicon-flash"></span> button, or
      the whole chapter, on several cores, from a
      <a target="_blank" href="{{ base_url }}/terminals/1">terminal</a>:
      <code>python -m autograder autograde {{ assignment_id }} --jobs 2</code>.
      Either way grading runs each notebook in the sandbox, checks every graded function
      outside it and flags what a human should look at: read a submission's
      <b>Flags</b> before you trust its score.
    </p>
    <p id="course-similarity">
      Copy detection compares every graded cell with the course's code and the class's:
      <a target="_blank" href="{{ base_url }}/formgrader/course/similarity/{{ assignment_id }}.html">the
      class report</a> shows each cell's closest pairs side by side, flagged or not (written
      after autograding; <code>python -m autograder similarity {{ assignment_id }}</code> writes
      it again). Flags of copy detection never change a score.
    </p>
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
  <th class="text-center no-sort">Autograde</th>
  <th class="text-center no-sort">Generate Feedback</th>
  <th class="text-center no-sort">Release Feedback</th>
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
  <td></td>
  <td></td>
</tr>
{%- endblock -%}
